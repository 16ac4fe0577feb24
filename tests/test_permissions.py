"""Another local user can neither read a store nor make nbmemory write where they choose.

Issue 18, item 1. A store directory another user owns or can write to (group or world,
sticky or not; in service and in local mode; also a ``.nbmemory/`` found above the working
directory) is refused with a message that says how to fix it; files nbmemory opens in a
store are never reached through a symbolic link; the database, its WAL and the vector
index are 0600 in a 0700 directory even when the directory existed as 0755. The tests
that need a second uid run as root and switch to it (``useradd`` when it does not exist);
elsewhere they are skipped and say why.
"""

import os
import pwd
import shutil
import stat
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import pytest

from nbmemory.config import locate_store
from nbmemory.embed import HashEmbedder
from nbmemory.errors import StoreUnavailable
from nbmemory.memory import Memory
from nbmemory.service import stop
from nbmemory.service.protocol import lock_held

HASH = "hash:64"
OTHER = "nbmemory-other"  # the second local user, created when missing


@pytest.fixture
def store(store_dir):
    yield store_dir
    stop(store_dir, timeout=30)


def open_store(store, mode):
    if mode == "local":
        return Memory.open(store, embedder=HashEmbedder(), mode="local")
    return Memory.open(store, model=HASH, mode="service")


@pytest.fixture
def umask_022():
    """The usual umask: files would be created 0644 unless nbmemory sees to it."""
    old = os.umask(0o022)
    yield
    os.umask(old)


def modes(store):
    """Every entry of the store directory with its permission bits, and the directory's."""
    out = {"<dir>": stat.S_IMODE(os.lstat(store).st_mode)}
    for path in Path(store).iterdir():
        out[path.name] = stat.S_IMODE(os.lstat(path).st_mode)
    return out


# -- directories other users could write to ---------------------------------------------------

@pytest.mark.parametrize("access", ["local", "service"])
@pytest.mark.parametrize("mode, who", [(0o770, "its group"), (0o775, "its group"),
                                       (0o777, "every user"), (0o1777, "every user"),
                                       (0o1770, "its group")])
def test_a_store_directory_others_can_write_to_is_refused(store, access, mode, who):
    store.mkdir()
    store.chmod(mode)
    expected = (rf"The store directory {store} cannot be used safely: it is writable by "
                rf"{who} \(mode {mode:o}.*\), so another user could .* plant links in it\. "
                rf"Restrict it with: chmod 700 {store}")
    with pytest.raises(StoreUnavailable, match=expected):
        open_store(store, access)
    assert sorted(p.name for p in store.iterdir()) == []  # nothing written there
    assert not lock_held(store)


@pytest.mark.parametrize("access", ["local", "service"])
def test_a_store_path_that_is_a_file_or_under_one_says_so(tmp_path, access):
    afile = tmp_path / "notes.txt"
    afile.write_text("not a store")
    for store in (afile, afile / "store"):
        with pytest.raises(StoreUnavailable, match=(
                rf"^Cannot open the store {store}: {afile} is a file, not a directory\. Give "
                r"the directory that holds memory.duckdb \(or where one should be created\)\.$")):
            open_store(store, access)
    assert afile.read_text() == "not a store"


@pytest.mark.parametrize("access", ["local", "service"])
def test_a_store_directory_that_cannot_be_created_says_so(tmp_path, access):
    """Any refusal of mkdir (here a name longer than the file system allows; also /proc, a
    full disk) is said in words, not as FileNotFoundError's traceback."""
    store = tmp_path / ("x" * 300) / "store"
    with pytest.raises(StoreUnavailable, match=(
            rf"^The store directory {store} cannot be created \([^:]+\)\. "
            r"Give a directory this user can create and write\.$")):
        open_store(store, access)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("mode", [0o777, 0o770])
def test_a_store_found_above_the_working_directory_must_be_private(tmp_path, mode):
    found = tmp_path / ".nbmemory"
    found.mkdir()
    found.chmod(mode)
    project = tmp_path / "project" / "notebooks"
    project.mkdir(parents=True)
    with pytest.raises(StoreUnavailable, match=(
            rf"Found the store {found} above {project}, but it is writable by .*: another "
            rf"user may have put it there, so nbmemory will not use it\. Remove it if it is "
            rf"not yours, or name your own store with --store DIR or NBMEMORY_HOME")):
        locate_store(cwd=project, environ={})
    result = subprocess.run(  # what a notebook or the CLI started there gets
        [sys.executable, "-c", "from nbmemory import Memory; Memory.open(mode='local')"],
        cwd=project, capture_output=True, text=True, timeout=120,
        env={k: v for k, v in os.environ.items() if k != "NBMEMORY_HOME"})
    assert result.returncode != 0 and "will not use it" in result.stderr
    assert sorted(p.name for p in found.iterdir()) == []
    found.chmod(0o700)  # once it is private it is the store again
    assert locate_store(cwd=project, environ={}).path == found


# -- links planted in the store directory ------------------------------------------------------

@pytest.mark.parametrize("name, access", [("owner.lock", "local"), ("owner.lock", "service"),
                                          ("owner.log", "service"), ("spawn.lock", "service")])
def test_links_in_the_store_directory_are_never_followed(store, tmp_path, name, access):
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    store.mkdir(mode=0o700)
    (store / name).symlink_to(victim)
    with pytest.raises(StoreUnavailable, match=(
            rf"{store / name} is a symbolic link; nbmemory never follows links in a store "
            rf"directory .* Remove it \(rm {store / name}\)")):
        open_store(store, access)
    assert victim.read_text() == "precious\n"
    assert (store / name).is_symlink()  # left for the user to look at, and refused again
    (store / name).unlink()
    assert not lock_held(store)


def test_a_link_in_place_of_owner_json_is_replaced_not_followed(store, tmp_path):
    victim = tmp_path / "victim.json"
    victim.write_text('{"precious": true}')
    store.mkdir(mode=0o700)
    (store / "owner.json").symlink_to(victim)
    with Memory.open(store, model=HASH, mode="service") as memory:
        memory.remember("owner.json is the owner's own file")
        assert not (store / "owner.json").is_symlink()
    assert victim.read_text() == '{"precious": true}'


# -- the files' own modes ---------------------------------------------------------------------

@pytest.mark.parametrize("access", ["local", "service"])
def test_store_files_are_private_even_in_a_directory_that_was_0755(store, umask_022, access):
    store.mkdir()
    store.chmod(0o755)
    with open_store(store, access) as memory:
        for i in range(3):
            memory.remember(f"secret finding {i}: the salary table is s3://hr/salaries")
        memory.snapshot("sealed")
        assert modes(store)["<dir>"] == 0o700  # others are kept out while it is open
        if access == "service":  # the owner creates everything 0600 from the start
            assert (store / "memory.duckdb.wal").exists()
            assert {n: m for n, m in modes(store).items() if m & 0o077} == {}
    stop(store)
    found = modes(store)
    assert {"memory.duckdb", "vectors.usearch"} <= set(found)
    assert {n: m for n, m in found.items() if m & 0o077} == {}  # every file 0600, dir 0700


def test_files_next_to_the_store_that_are_not_nbmemorys_are_left_alone(store, umask_022):
    store.mkdir(mode=0o700)
    (store / "notes-for-myself.txt").write_text("mine")
    (store / "notes-for-myself.txt").chmod(0o644)
    with open_store(store, "local") as memory:
        memory.remember("a note")
    assert stat.S_IMODE((store / "notes-for-myself.txt").stat().st_mode) == 0o644
    assert stat.S_IMODE((store / "memory.duckdb").stat().st_mode) == 0o600


# -- a second local user (root only) ----------------------------------------------------------

@pytest.fixture
def other_user():
    """(uid, gid) of a second local user; the tests that need one are root-only."""
    if os.geteuid() != 0:
        pytest.skip("needs root: acting as a second local user (setuid, useradd) is only "
                    "possible as root")
    try:
        entry = pwd.getpwnam(OTHER)
    except KeyError:
        if shutil.which("useradd") is None:
            pytest.skip("needs useradd to create a second local user")
        subprocess.run(["useradd", "--system", "--no-create-home", "--shell",
                        "/usr/sbin/nologin", OTHER], check=True, capture_output=True)
        entry = pwd.getpwnam(OTHER)
    return entry.pw_uid, entry.pw_gid


def as_user(user, *command):
    uid, gid = user
    return subprocess.run(list(command), user=uid, group=gid, extra_groups=[], cwd="/",
                          capture_output=True, text=True, timeout=60)


@pytest.fixture
def shared_base():
    """A directory every user may enter (like a project under /srv), outside the
    test's private temporary directory."""
    base = Path(tempfile.mkdtemp(prefix="nbmemory-shared-"))
    base.chmod(0o755)
    yield base
    from conftest import stop_owners_under

    stop_owners_under(str(base))
    shutil.rmtree(base, ignore_errors=True)


@pytest.mark.parametrize("access", ["local", "service"])
def test_another_user_can_read_nothing_in_a_store(other_user, shared_base, umask_022, access):
    store = shared_base / "store"
    store.mkdir()
    store.chmod(0o755)  # as a user might have made it
    with open_store(store, access) as memory:
        memory.remember("the merger with ACME closes on 2027-03-01")
        while_open = as_user(other_user, "ls", str(store))
        assert while_open.returncode != 0 and "Permission denied" in while_open.stderr
    if access == "service":
        stop(store)
    for path in store.iterdir():
        read = as_user(other_user, "cat", str(path))
        assert read.returncode != 0 and "ACME" not in read.stdout, path
    store.chmod(0o755)  # even if the user opens the directory up later
    for path in store.iterdir():
        if path.is_file():
            read = as_user(other_user, "cat", str(path))
            assert read.returncode != 0 and "Permission denied" in read.stderr, path


def test_a_store_another_user_planted_above_the_working_directory_is_refused(
        other_user, shared_base):
    shared_base.chmod(0o1777)  # like /tmp
    planted = shared_base / ".nbmemory"
    assert as_user(other_user, "mkdir", "-m", "700", str(planted)).returncode == 0
    project = shared_base / "project"
    project.mkdir()
    code = textwrap.dedent("""
        from nbmemory import Memory
        Memory.open(mode="local")
    """)
    result = subprocess.run([sys.executable, "-c", code], cwd=project, capture_output=True,
                            text=True, timeout=120,
                            env={k: v for k, v in os.environ.items() if k != "NBMEMORY_HOME"})
    assert result.returncode != 0
    assert (f"Found the store {planted} above {project}, but it belongs to another user "
            f"(uid {other_user[0]})") in result.stderr


def test_links_another_user_plants_in_a_shared_store_are_not_followed_by_root(
        other_user, shared_base, tmp_path):
    victim = tmp_path / "victim.txt"  # a file of root's
    victim.write_text("root's file\n")
    store = shared_base / "store"
    store.mkdir()
    store.chmod(0o1777)  # a sticky world-writable store (local mode accepted it)
    for name in ("owner.lock", "owner.log"):
        assert as_user(other_user, "ln", "-s", str(victim), str(store / name)).returncode == 0
    for access in ("local", "service"):
        with pytest.raises(StoreUnavailable, match="writable by every user"):
            open_store(store, access)
    assert victim.read_text() == "root's file\n"


def test_a_store_its_user_cannot_write_is_refused_in_words_in_local_mode(
        other_user, shared_base):
    store = shared_base / "store"
    with Memory.open(store, embedder=HashEmbedder(), mode="local") as memory:
        memory.remember("orders.amount is in cents")
    for path in (store, *store.iterdir()):
        os.chown(path, *other_user)
    store.chmod(0o500)
    # As that user, in a child of this process (its Python may not be theirs to run).
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        try:
            os.setgroups([])
            os.setgid(other_user[1])
            os.setuid(other_user[0])
            with Memory.open(store, embedder=HashEmbedder(), mode="local") as memory:
                memory.recall("cents")
            said = "opened"
        except BaseException as exc:  # noqa: BLE001 - said to the parent
            said = f"{type(exc).__name__}: {exc}"
        os.write(write, said.encode())
        os._exit(0)
    os.close(write)
    with os.fdopen(read) as pipe:
        said = pipe.read()
    os.waitpid(pid, 0)
    assert said.startswith(
        f"StoreUnavailable: The store directory {store} cannot be written by this user; "
        "nbmemory keeps its lock, write-ahead log and index files there, even to read."), said


def test_a_store_directory_of_another_user_is_refused(other_user, shared_base):
    store = shared_base / "store"
    store.mkdir(mode=0o700)
    os.chown(store, *other_user)
    for access in ("local", "service"):
        with pytest.raises(StoreUnavailable, match=(
                rf"{store} cannot be used safely: it belongs to another user \(uid "
                rf"{other_user[0]}\).*Use a store of your own")):
            open_store(store, access)
