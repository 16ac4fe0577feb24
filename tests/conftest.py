import os

import pytest

from nbmemory.embed import HashEmbedder, SentenceTransformerEmbedder
from nbmemory.memory import Memory

os.environ.setdefault("HF_HUB_OFFLINE", "1")

# jp_fetch, jp_serverapp...: a real Jupyter server for tests/test_server.py.
pytest_plugins = ["pytest_jupyter.jupyter_server"]


@pytest.fixture
def store_dir(tmp_path):
    return tmp_path / "store"


@pytest.fixture
def memory(store_dir):
    """A store with the tiny deterministic embedder: for tests where the model is irrelevant."""
    with Memory.open(store_dir, embedder=HashEmbedder(), settings=None) as mem:
        yield mem


@pytest.fixture
def engine(memory):
    return memory._backend.engine


@pytest.fixture(scope="session")
def real_embedder():
    """The real default model, loaded once per test session."""
    return SentenceTransformerEmbedder()


@pytest.fixture
def real_memory(store_dir, real_embedder):
    with Memory.open(store_dir, embedder=real_embedder) as mem:
        yield mem
