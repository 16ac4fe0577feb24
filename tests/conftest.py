import os
from pathlib import Path

import pytest

from nbmemory.embed import HashEmbedder, SentenceTransformerEmbedder
from nbmemory.memory import Memory
from waiting import signal_owner

os.environ.setdefault("HF_HUB_OFFLINE", "1")

# jp_fetch, jp_serverapp...: a real Jupyter server for tests/test_server.py.
pytest_plugins = ["pytest_jupyter.jupyter_server"]


@pytest.fixture
def store_dir(tmp_path):
    return tmp_path / "store"


@pytest.fixture
def memory(store_dir):
    """A store with the tiny deterministic embedder: for tests where the model is irrelevant
    (tests/test_team_contract.py runs the same tests on a team store)."""
    with Memory.open(store_dir, embedder=HashEmbedder(), settings=None) as mem:
        yield mem


@pytest.fixture
def engine(memory):
    return memory._backend.engine


@pytest.fixture(scope="session", autouse=True)
def model_cache(tmp_path_factory):
    """The model's ONNX export (nbmemory/onnx_model.py) is made once in this session, here,
    not in the user's cache; processes the tests start inherit it."""
    os.environ["NBMEMORY_MODEL_CACHE"] = str(tmp_path_factory.mktemp("models"))
    return os.environ["NBMEMORY_MODEL_CACHE"]


@pytest.fixture(scope="session")
def real_embedder():
    """The real default model, loaded once per test session."""
    return SentenceTransformerEmbedder()


@pytest.fixture
def real_memory(store_dir, real_embedder):
    with Memory.open(store_dir, embedder=real_embedder) as mem:
        yield mem


def stop_owners_under(base: str) -> None:
    """Stop every store owner process serving a store below ``base`` (found through /proc,
    or where there is none, as on macOS, by the owner.json each one writes)."""
    from nbmemory.service import stop

    if not Path("/proc/self").exists():
        for info in Path(base).rglob("owner.json"):
            try:
                stop(info.parent, timeout=30)
            except Exception:  # noqa: BLE001 - as below; the next test's check goes on
                continue
        return
    for proc in Path("/proc").glob("[0-9]*"):
        try:
            args = (proc / "cmdline").read_bytes().decode(errors="replace").split("\0")
        except OSError:
            continue
        if "nbmemory.service" in args and "--store" in args:
            store = args[args.index("--store") + 1]
            if Path(store).is_relative_to(base):
                try:
                    stop(store, timeout=30)
                except Exception:  # noqa: BLE001 - whatever it is, it must not outlive the tests
                    try:  # the same process still (its pid not reused meanwhile)?
                        if (proc / "cmdline").read_bytes().decode(errors="replace") \
                                .split("\0") == args:
                            signal_owner(int(proc.name))
                    except (ProcessLookupError, FileNotFoundError):
                        pass


@pytest.fixture(autouse=True)
def no_owner_left_behind(tmp_path):
    """Owners started by a test exit with it (each holds a model: they add up)."""
    yield
    stop_owners_under(str(tmp_path))


@pytest.fixture(scope="session", autouse=True)
def no_owner_left_after_the_session(tmp_path_factory):
    yield
    stop_owners_under(str(tmp_path_factory.getbasetemp()))


@pytest.fixture(scope="session")
def postgres_server():
    """One real PostgreSQL server for the session (tests/postgres.py)."""
    from postgres import Server

    server = Server()
    yield server
    server.close()


@pytest.fixture
def team_url(postgres_server, tmp_path, monkeypatch):
    """The address of a new, empty team store; its local caches below ``tmp_path``."""
    monkeypatch.setenv("NBMEMORY_CACHE_DIR", str(tmp_path / "cache"))
    return postgres_server.url(postgres_server.new_database())
