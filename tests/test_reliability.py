"""What the owner service promises when things go wrong (issue 18, items 8 to 11).

Real owner processes, real files. Waiting is always for a condition, with a deadline.

- A full disk is reported as a full disk while the owner lives; its own log failing
  never drops a request; leftover temporary files are removed (item 8).
- A write (or read) whose owner died is sent again to each new owner until a deadline,
  and the user is told it waits (item 9). ``NBMEMORY_TEST_HOLD`` names a file: while it
  exists, owners hold every call before computing it, as if their model were loading.
- A client configured with another model does not stop an owner other clients are
  connected to (item 10).
- An owner exits when its directory, lock file or socket is gone or replaced, honours its
  idle timeout whatever happened to its files, and exits within two seconds of SIGTERM
  after committing what it acknowledged (item 11).
"""

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from nbmemory.embed import HashEmbedder
from nbmemory.errors import EmbedderMismatch, ModelUnavailable, StoreDamaged, StoreUnavailable
from nbmemory.memory import Memory
from nbmemory.service import owner_info, stop
from nbmemory.service.protocol import lock_held

from waiting import pid_alive, served, signal_owner, wait_for

HASH = "hash:64"


def serving(store, but_not=()):
    """The pid of the store's owner once it serves (and is none of ``but_not``)."""
    info = owner_info(store) or {}
    if info.get("mode") == "service" and info.get("state") == "serving" \
            and info.get("pid") not in but_not:
        return info["pid"]
    return None


def holding_a_request(store, but_not=()):
    """The pid of a serving owner that has received a call it has not computed yet."""
    info = owner_info(store) or {}
    if info.get("state") == "serving" and info.get("queue", 0) >= 1 \
            and info.get("pid") not in but_not:
        return info["pid"]
    return None


def kill(pid, sig=signal.SIGKILL):
    signal_owner(pid, sig)
    wait_for(lambda: not pid_alive(pid), what=f"owner {pid} to die")


@pytest.fixture
def store(store_dir):
    yield store_dir
    try:
        stop(store_dir, timeout=30)
    except Exception:  # noqa: BLE001 - a test may have removed or broken the store
        pass


@pytest.fixture
def hold(tmp_path, monkeypatch):
    """The hold file's path; owners started from now on hold calls while it exists."""
    path = tmp_path / "hold"
    monkeypatch.setenv("NBMEMORY_TEST_HOLD", str(path))
    return path


CLIENT = textwrap.dedent("""
    import json, sys
    from nbmemory import Memory
    store, operation = sys.argv[1], sys.argv[2]
    memory = Memory.open(store, model="hash:64", mode="service")
    if operation == "remember":
        print(json.dumps({"id": memory.remember("the first note of the day").id}))
    elif operation == "remember_many":
        print(len(memory.remember_many([f"bulk finding {i}" for i in range(30)])))
    else:
        print(json.dumps({"hits": len(memory.recall("first note"))}))
""")


def client(store, operation, **env):
    return subprocess.Popen([sys.executable, "-c", CLIENT, str(store), operation],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "HF_HUB_OFFLINE": "1", **env})


def local_notes(store):
    with Memory.open(store, embedder=HashEmbedder(), mode="local") as memory:
        return [n.text for n in memory.notes(limit=1000).notes]


# -- item 9: resent until a deadline ----------------------------------------------------------

@pytest.mark.parametrize("operation", ["remember", "recall"])
def test_a_call_is_resent_to_successive_owners_until_one_answers(store, hold, operation):
    if operation == "recall":
        with Memory.open(store, embedder=HashEmbedder(), mode="local") as memory:
            memory.remember("the first note of the day")
    hold.touch()  # every owner now holds the call, as if its model were loading
    caller = client(store, operation)
    killed = []
    try:
        for _ in range(4):  # more owners lost than the two resends there used to be
            pid = wait_for(lambda: holding_a_request(store, killed), timeout=60,
                           what="an owner holding the call")
            kill(pid)
            killed.append(pid)
        wait_for(lambda: holding_a_request(store, killed), timeout=60, what="a fifth owner")
        hold.unlink()  # the model has loaded
        out, err = caller.communicate(timeout=60)
    finally:
        if caller.poll() is None:
            caller.kill()
    assert caller.returncode == 0, err
    assert err.count("waiting for a new owner to send it again (up to 120 s") == 1, err
    assert err.startswith(f"nbmemory: the store's owner stopped while handling {operation};")
    stop(store)
    assert local_notes(store) == ["the first note of the day"]  # applied once
    assert json.loads(out) == ({"id": 1} if operation == "remember" else {"hits": 1})


def test_a_call_an_owner_holds_says_it_still_waits_then_gives_up(store, hold, monkeypatch,
                                                                  capfd):
    """An owner stopped or stuck kept a notebook cell waiting in silence for ten minutes."""
    from nbmemory.service import client
    from nbmemory.service.client import ServiceBackend

    monkeypatch.setattr(client, "SLOW_NOTICE_S", 0.5)
    backend = ServiceBackend(store, model=HASH, request_timeout=3)
    try:
        backend.call("remember", text="orders.amount is in cents")
        capfd.readouterr()
        hold.touch()  # the owner now holds every call
        with pytest.raises(StoreUnavailable, match=r"The store's owner did not answer within 3 s"):
            backend.call("recall", query="cents")
        assert capfd.readouterr().err == (
            f"nbmemory: still waiting for the store's owner after 0.5 s: long work, or it is "
            f"stuck (see {store / 'owner.log'}; nbmemory stop --store {store} stops it)\n")
        with pytest.raises(StoreUnavailable, match=(  # a write is not sent again in silence
                r"did not answer within 3 s\. .* What it was asked \(remember\) may or may "
                r"not have been applied: check before sending it again\.$")):
            backend.call("remember", text="exports run at 02:00")
        hold.unlink()
        assert [h.note.text for h in backend.call("recall", query="cents")] == [
            "orders.amount is in cents"]
        monkeypatch.setattr(client, "SLOW_NOTICE_S", 30)  # a loaded machine may pause 0.5 s
        capfd.readouterr()
        assert [h.note.text for h in backend.call("recall", query="cents")] == [
            "orders.amount is in cents"]
        assert capfd.readouterr().err == ""  # answered in time: nothing said
    finally:
        backend.close()


def test_what_ambient_recall_asks_of_a_stuck_owner_waits_seconds_not_minutes(
        store, hold, monkeypatch):
    """Ambient recall asks under a cell that only read a file: a frozen owner held that cell
    for the request timeout (600 s by default)."""
    from nbmemory.service import client
    from nbmemory.service.client import ServiceBackend

    monkeypatch.setattr(client, "QUICK_TIMEOUT_S", 1.0)
    backend = ServiceBackend(store, model=HASH, request_timeout=600)
    try:
        backend.call("remember", text="orders.amount is in cents")
        hold.touch()
        with pytest.raises(StoreUnavailable, match=r"did not answer within 1 s"):
            backend.call("notes_about", paths=["data/orders.csv"], cwd=str(store.parent),
                         variables=None, error=None, k=5)
    finally:
        hold.unlink()
        backend.close()


def test_a_client_waiting_for_a_frozen_owner_says_so(store, monkeypatch, capfd):
    """A new client's wait for an owner that does not answer (frozen) was silent for 120 s."""
    from nbmemory.service import client
    from nbmemory.service.client import ServiceBackend

    with Memory.open(store, model=HASH, mode="service") as memory:
        memory.remember("orders.amount is in cents")
    pid = owner_info(store)["pid"]
    monkeypatch.setattr(client, "SLOW_NOTICE_S", 0.2)
    signal_owner(pid, signal.SIGSTOP)
    try:
        capfd.readouterr()
        with pytest.raises(StoreUnavailable, match=r"No owner of .* answered within 2 s"):
            ServiceBackend(store, model=HASH, startup_timeout=2).ensure_owner()
        assert re.match(rf"nbmemory: still waiting for an owner of {re.escape(str(store))} to "
                        r"answer after \d+ s \(up to 2 s", capfd.readouterr().err)
    finally:
        signal_owner(pid, signal.SIGCONT)


def killing_each_owner(store, caller):
    """Kill each owner holding the ``caller``'s call until the caller gives up: its stderr,
    and how many owners were killed."""
    killed = []
    try:
        while caller.poll() is None:
            pid = wait_for(lambda: caller.poll() is not None or holding_a_request(store, killed),
                           timeout=60, what="an owner holding the call, or the client to stop")
            if pid is True:
                break
            kill(pid)
            killed.append(pid)
        _, err = caller.communicate(timeout=60)
    finally:
        if caller.poll() is None:
            caller.kill()
    return err, len(killed)


def test_a_call_gives_up_at_its_resend_deadline_and_says_so(store, hold):
    hold.touch()
    caller = client(store, "remember", NBMEMORY_RESEND_TIMEOUT="3")
    err, killed = killing_each_owner(store, caller)
    assert caller.returncode == 1 and killed >= 2
    assert "OutcomeUnknown: The store's owner stopped" in err
    # Not "sending it again is safe": a new call is a new request, and would store it twice.
    assert "time(s) while handling remember, over 3 s of sending it again: it may or may " \
           "not have been applied, check before sending it again. See " in err
    hold.unlink()
    stop(store)
    assert local_notes(store) == []


def test_a_bulk_remember_given_up_says_how_to_send_it_again_without_copies(store, hold):
    """Chunks of a remember_many written before its owner was lost stay written, and the
    call's request id was one the caller never saw: sent again, they were stored twice (a
    probe: 512 copies among 2,000 notes)."""
    hold.touch()
    caller = client(store, "remember_many", NBMEMORY_RESEND_TIMEOUT="3")
    err, killed = killing_each_owner(store, caller)
    assert caller.returncode == 1 and killed >= 2
    said = re.search(r"OutcomeUnknown: The store's owner stopped .* check before sending it "
                     r"again\. See .*\. Some of the notes may have been written before it: to "
                     r"write only those missing, send the call again with "
                     r"request_id='([0-9a-f]{32})'\.", " ".join(err.split()))
    assert said, err
    hold.unlink()
    with Memory.open(store, model=HASH, mode="service") as memory:
        memory.remember_many([f"bulk finding {i}" for i in range(30)], request_id=said.group(1))
    stop(store)
    assert sorted(local_notes(store)) == sorted(f"bulk finding {i}" for i in range(30))


# -- item 10: a model choice of one client does not evict the others ---------------------------

def test_a_client_with_another_model_does_not_stop_an_owner_others_use(store):
    with Memory.open(store, model=HASH, mode="service") as first:
        first.remember("orders.amount is in cents")
        pid = owner_info(store)["pid"]
        with Memory.open(store, model="hash:32", mode="service") as second:
            with pytest.raises(EmbedderMismatch) as caught:
                second.recall("cents")
            assert str(caught.value) == (
                f"The store's owner (pid {pid}) uses the model {HASH} and serves 1 other "
                f"client(s) right now; this client is configured with hash:32, and will not "
                f"stop it for them. Use the store's model (set the model to '{HASH}'), "
                f"or switch the store to hash:32 for everyone with "
                f"Memory.reembed() with the model set to hash:32.")
            assert owner_info(store)["pid"] == pid
            assert first.recall("cents")[0].note.text == "orders.amount is in cents"
        assert "kept the model hash:64: a client asked for hash:32 while 1 other client(s)" \
               in (store / "owner.log").read_text()
    # Alone, a client may replace the owner with one of its own model (as before).
    wait_for(lambda: (owner_info(store) or {}).get("clients", 1) == 0,
             what="the first clients' connections to close")
    with Memory.open(store, model="hash:32", mode="service") as alone:
        with pytest.raises(EmbedderMismatch, match="made with hash:64, but the configured "
                                                   "model is 'hash:32'"):
            alone.recall("cents")
        assert owner_info(store)["pid"] != pid and owner_info(store)["model"] == "hash:32"


def raw_call(store, operation, headers):
    """One call to the owner with exactly these headers (no client logic)."""
    import http.client

    from nbmemory.service import transport as transports
    from nbmemory.service.protocol import read_info

    address = transports.address_of(store, read_info(store))
    conn = http.client.HTTPConnection("nbmemory", timeout=30)
    conn.sock = address.connect(30)
    try:
        conn.request("POST", "/v1/call", body=json.dumps(
            {"operation": operation, "arguments": {}}).encode(),
            headers={"Content-Type": "application/json", **address.headers(), **headers})
        response = conn.getresponse()
        return response.status, json.loads(response.read())
    finally:
        conn.close()


@pytest.mark.parametrize("operation", ["reembed", "reindex"])
def test_reembed_may_replace_an_owner_others_use(store, operation):
    """Switching the store's model is for everyone: such a call is told to replace the
    owner (OwnerMismatch), where any other call is refused (EmbedderMismatch)."""
    with Memory.open(store, model=HASH, mode="service") as first:
        first.remember("orders.amount is in cents")
        other = {"X-NbMemory-Model": "hash:32", "X-NbMemory-Client": "another-client"}
        status, payload = raw_call(store, "recall", other)
        assert status == 409 and payload["error"]["type"] == "EmbedderMismatch"
        status, payload = raw_call(store, operation, other)
        assert status == 409 and payload["error"]["type"] == "OwnerMismatch"
        assert payload["error"]["message"] == "The client wants model hash:32 (owner uses hash:64)."


# -- item 11: owners do not outlive their store -----------------------------------------------

def _remove(store):
    shutil.rmtree(store)


def _replace(store):
    shutil.rmtree(store)
    store.mkdir(mode=0o700)


def _move(store):
    store.rename(store.with_name("moved"))


@pytest.mark.parametrize("damage", [_remove, _replace, _move])
def test_an_owner_exits_when_its_store_directory_is_gone(store, damage):
    memory = Memory.open(store, model=HASH, mode="service", idle_timeout=0)  # never idle
    memory.remember("in a scratch store")
    pid = owner_info(store)["pid"]
    damage(store)
    wait_for(lambda: not pid_alive(pid), timeout=30, what="the owner to exit")
    memory.close()


@pytest.mark.parametrize("damage", [_remove, _replace])
def test_a_write_just_after_the_store_is_deleted_is_kept_in_the_store_there_now(store, damage):
    """The owner of the deleted files must not acknowledge a write into them during the
    second its watch takes to notice: the call goes to the next owner, of the new store."""
    with Memory.open(store, model=HASH, mode="service", idle_timeout=0) as memory:
        memory.remember("in the store that is deleted")
        damage(store)
        written = [memory.remember(f"written after the delete {i}") for i in range(5)]
        assert [n.id for n in written] == [1, 2, 3, 4, 5]  # no id given out twice
        assert sorted(n.text for n in memory.notes().notes) == sorted(n.text for n in written)


def test_a_local_store_deleted_while_open_keeps_no_write_and_spares_the_new_one(tmp_path):
    store = tmp_path / "store"
    memory = Memory.open(store, model=HASH, mode="local")
    memory.remember("before the delete")
    shutil.rmtree(store)
    with pytest.raises(StoreUnavailable, match="was deleted or replaced while this process "
                                               "had it open, so this write was not kept"):
        memory.remember("after the delete")
    # Another process makes a new store there and dies before a checkpoint: its notes are
    # in the write-ahead log only, which closing the old store removed (DuckDB, by name).
    subprocess.run([sys.executable, "-c", textwrap.dedent(f"""
        import os
        from nbmemory.memory import Memory
        memory = Memory.open({str(store)!r}, model={HASH!r}, mode="local")
        memory.remember("new one"); memory.remember("new two")
        os._exit(0)""")], check=True)
    memory.close()
    with Memory.open(store, model=HASH, mode="local") as again:
        assert sorted(n.text for n in again.notes().notes) == ["new one", "new two"]


def test_a_graph_built_after_its_store_was_deleted_is_not_saved_into_the_next(tmp_path):
    """Else the next store at that path holds an index of 2,500 notes it never had, and is
    refused as one that lost its database."""
    store = tmp_path / "store"
    with Memory.open(store, model=HASH, mode="local") as memory:
        memory.remember_many([{"text": f"note {i} about orders"} for i in range(2_500)])
    for leftover in store.glob("vectors.usearch*"):
        leftover.unlink()
    memory = Memory.open(store, model=HASH, mode="local")  # builds the graph in the background
    shutil.rmtree(store)
    store.mkdir()
    assert memory._backend.engine.vectors.wait(120)
    memory.close()
    assert list(store.iterdir()) == []
    with Memory.open(store, model=HASH, mode="local") as fresh:
        assert fresh.remember("the first note of the new store").id == 1


def test_a_deleted_database_beside_its_index_is_refused_not_started_afresh(tmp_path):
    """The vector index is the evidence that notes were there: a new empty store over it
    would tell the user nothing was ever remembered, and overwrite that evidence."""
    store = tmp_path / "store"
    with Memory.open(store, model=HASH, mode="local") as memory:
        memory.remember_many([{"text": f"finding {i}"} for i in range(5)])
    for database in store.glob("memory.duckdb*"):
        database.unlink()
    said = (f"The store {store} has lost its database: its vector index saw journal position "
            f"5, and memory.duckdb is missing or holds less (position 0). Nothing was changed.")
    cli = subprocess.run([str(Path(sys.executable).parent / "nbmemory"), "--store", str(store), "status"],
                         capture_output=True, text=True)
    assert cli.returncode == 3 and said in " ".join(cli.stderr.split()), cli.stderr
    with pytest.raises(StoreDamaged, match=re.escape(said)):
        Memory.open(store, model=HASH, mode="local")
    assert json.loads((store / "vectors.usearch.json").read_text())["seq"] == 5  # kept
    doctor = subprocess.run([str(Path(sys.executable).parent / "nbmemory"), "--store", str(store), "doctor"],
                            capture_output=True, text=True)
    assert "memory.duckdb is missing from" in doctor.stdout and doctor.returncode != 0


def test_a_torn_write_ahead_log_is_said_with_advice_that_keeps_its_notes(tmp_path):
    """A log whose last entry fails its checksum (a power loss, not a kill) stops DuckDB
    opening the store. The advice was to move the database away to start a new store: the
    new store's first open deleted the log, and every note since the last checkpoint."""
    store = tmp_path / "store"
    nbmemory = str(Path(sys.executable).parent / "nbmemory")
    crash = textwrap.dedent(f"""
        import os
        from nbmemory.memory import Memory
        memory = Memory.open({str(store)!r}, model={HASH!r}, mode="local")
        for i in range(20):
            memory.remember(f"acknowledged finding {{i}}")
        os._exit(0)  # no close, no checkpoint: every note is in the log alone
    """)
    subprocess.run([sys.executable, "-c", crash], check=True, timeout=120)
    log = store / "memory.duckdb.wal"
    torn = bytearray(log.read_bytes())
    torn[-100] ^= 0xFF
    log.write_bytes(bytes(torn))
    cli = subprocess.run([nbmemory, "--store", str(store), "list"], capture_output=True, text=True)
    said = " ".join(cli.stderr.split())
    assert cli.returncode == 3 and "Its write-ahead log memory.duckdb.wal is damaged at its end" \
        in said and "moving memory.duckdb away alone loses every note the log holds" in said, said
    cut = re.search(r"os\.truncate\('(.+?)', (\d+)\)", said)
    assert cut and cut.group(1) == str(log)
    os.truncate(cut.group(1), int(cut.group(2)))  # as advised: all but the torn entry
    with Memory.open(store, model=HASH, mode="local") as memory:
        assert memory.notes().total == 19
    # The database moved away from its log: refused, and the log kept, not replaced.
    (store / "memory.duckdb").rename(tmp_path / "moved.duckdb")
    (store / "memory.duckdb.wal").write_bytes(bytes(torn))
    cli = subprocess.run([nbmemory, "--store", str(store), "remember", "a new note"],
                         capture_output=True, text=True)
    assert cli.returncode == 3 and (
        f"The store {store} has lost its database: memory.duckdb is missing, and its "
        "write-ahead log memory.duckdb.wal, which may hold every note since its last "
        "checkpoint, is still there. Nothing was changed.") in " ".join(cli.stderr.split())
    assert log.read_bytes() == bytes(torn) and not (store / "memory.duckdb").exists()


def test_a_store_directory_that_cannot_be_written_is_said_in_words(tmp_path):
    store = tmp_path / "store"
    with Memory.open(store, model=HASH, mode="local") as memory:
        memory.remember("written while it could be")
    if os.geteuid() != 0 or not shutil.which("chattr"):
        pytest.skip("needs root's chattr: root writes to a chmod 500 directory anyway")
    if subprocess.run(["chattr", "+i", str(store)], capture_output=True).returncode:
        pytest.skip("this file system has no immutable flag")
    try:
        for mode in ("service", "local"):
            with pytest.raises(StoreUnavailable, match=re.escape(
                    f"The store directory {store} cannot be written by this user; nbmemory "
                    f"keeps its lock, write-ahead log and index files there, even to read.")):
                with Memory.open(store, model=HASH, mode=mode) as memory:
                    memory.notes()
    finally:
        subprocess.run(["chattr", "-i", str(store)], check=True)


def test_a_script_that_never_closes_its_store_exits_cleanly_while_the_graph_builds(tmp_path):
    """Scripts often skip close(): exiting while the vector graph is built in the background
    aborted the interpreter (usearch's threads killed mid-insert), exit status 134."""
    store = tmp_path / "store"
    with Memory.open(store, model=HASH, mode="local") as memory:
        memory.remember_many([{"text": f"note {i} about orders"} for i in range(2_500)])
    for leftover in store.glob("vectors.usearch*"):
        leftover.unlink()  # the next open builds the graph again, in the background
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(f"""
        from nbmemory.memory import Memory
        memory = Memory.open({str(store)!r}, model={HASH!r}, mode="local")
        print(memory.remember("written by a script that never closes").id)""")],
        capture_output=True, text=True, timeout=120)
    assert (done.returncode, done.stdout, done.stderr) == (0, "2501\n", "")
    with Memory.open(store, model=HASH, mode="local") as memory:
        assert memory.get(2501).text == "written by a script that never closes"


@pytest.mark.parametrize("damage", ["removed", "replaced"])
def test_an_owner_exits_when_its_lock_file_is_gone(store, damage):
    with Memory.open(store, model=HASH, mode="service", idle_timeout=0) as memory:
        note = memory.remember("kept")
        pid = owner_info(store)["pid"]
        lock = store / "owner.lock"
        if damage == "removed":
            lock.unlink()
        else:
            (store / "new.lock").write_text("")
            os.replace(store / "new.lock", lock)
        wait_for(lambda: not pid_alive(pid), timeout=30, what="the owner to exit")
        log = (store / "owner.log").read_text()
        assert f"stopping: its lock file {lock} was removed or replaced" in log
        assert memory.get(note.id).text == "kept"  # the next owner serves it
        assert owner_info(store)["pid"] != pid


def test_an_owner_whose_nbmemory_was_upgraded_under_it_gives_way(store, tmp_path, monkeypatch):
    """An owner kept running through an upgrade (its idle timeout, a kernel using it) went on
    serving the old code: the new CLI's calls failed with TypeError or 'Unknown operation',
    and every version said 0.1.0, so nothing told them apart."""
    import nbmemory

    installed = tmp_path / "site"  # the owner runs this copy of nbmemory, upgraded below
    shutil.copytree(Path(nbmemory.__file__).parent, installed / "nbmemory",
                    ignore=shutil.ignore_patterns("__pycache__", "labextension"))
    monkeypatch.setenv("PYTHONPATH", str(installed))
    with Memory.open(store, model=HASH, mode="service", idle_timeout=0) as memory:
        note = memory.remember("kept across the upgrade")
        pid = owner_info(store)["pid"]
        module = installed / "nbmemory" / "wording.py"
        module.write_text(module.read_text() + "\n# the new version\n")
        wait_for(lambda: not pid_alive(pid), timeout=30, what="the old owner to exit")
        log = (store / "owner.log").read_text()
        assert "stopping: its nbmemory was upgraded or changed: the next call starts one of " \
               "the new code" in log
        assert memory.get(note.id).text == "kept across the upgrade"  # a new owner serves it
        assert owner_info(store)["pid"] != pid


def test_an_owner_exits_when_its_socket_is_removed(store, monkeypatch):
    monkeypatch.setenv("NBMEMORY_TRANSPORT", "unix")
    with Memory.open(store, model=HASH, mode="service", idle_timeout=0) as memory:
        memory.remember("kept")
        pid = owner_info(store)["pid"]
        (store / "owner.sock").unlink()  # no client can reach it any more
        wait_for(lambda: not pid_alive(pid), timeout=30, what="the owner to exit")
        assert memory.recall("kept")[0].note.text == "kept"


def directory_in_place_of(path: Path) -> None:
    """``path`` replaced by a directory. The owner rewrites its owner.json when it is
    missing, so it may do so between the unlink and the mkdir (seen on a loaded machine):
    then the two go again."""
    for _ in range(100):
        path.unlink(missing_ok=True)
        try:
            path.mkdir()
            return
        except FileExistsError:
            continue
    raise AssertionError(f"{path} kept coming back")


def test_an_owner_honours_its_idle_timeout_whatever_happened_to_its_files(store):
    # 3 s: the owner must see owner.json's place taken before it goes idle
    with Memory.open(store, model=HASH, mode="service", idle_timeout=3) as memory:
        memory.remember("short-lived")
        [(pid, _)] = served(store)
        directory_in_place_of(store / "owner.json")  # owner.json can no longer be written
        wait_for(lambda: not pid_alive(pid), timeout=30, what="the idle owner to exit")
        log = (store / "owner.log").read_text()
        assert "owner.json is missing and cannot be written" in log
        assert "stopping: idle for 3 s" in log and log.rstrip().endswith("stopped")
        (store / "owner.json").rmdir()
    assert not lock_held(store)


def test_an_owner_rewrites_a_removed_owner_json(store):
    with Memory.open(store, model=HASH, mode="service", idle_timeout=0) as memory:
        memory.remember("kept")
        pid = owner_info(store)["pid"]
        (store / "owner.json").unlink()
        wait_for(lambda: (store / "owner.json").exists(), what="owner.json to come back")
        assert owner_info(store)["pid"] == pid
        memory._backend._drop_connections()  # a new connection reads the address again
        assert memory.recall("kept")[0].note.text == "kept"


def test_sigterm_stops_the_owner_within_two_seconds_after_what_it_acknowledged(store, hold):
    memory = Memory.open(store, model=HASH, mode="service", idle_timeout=0)
    acknowledged = [memory.remember(f"acknowledged {i}").id for i in range(20)]
    pid = owner_info(store)["pid"]
    hold.touch()  # the next call stays in flight, unanswered
    results = []
    in_flight = threading.Thread(target=lambda: results.append(memory.remember("in flight")))
    in_flight.start()
    wait_for(lambda: holding_a_request(store), what="the owner to hold the call")
    signalled = time.monotonic()
    signal_owner(pid, signal.SIGTERM)
    wait_for(lambda: not pid_alive(pid), timeout=10, what="the owner to exit")
    assert time.monotonic() - signalled < 10  # not the minute a stop waits for calls
    hold.unlink()  # the call is sent again to the next owner, which answers it
    in_flight.join(timeout=60)
    assert results and results[0].text == "in flight"
    memory.close()
    stop(store)
    texts = local_notes(store)
    assert sorted(texts) == sorted([f"acknowledged {i}" for i in range(20)] + ["in flight"])
    assert len(acknowledged) == 20


def test_sigterm_cuts_short_a_shutdown_that_waits_for_a_call(store, hold):
    """Asked to stop, an owner waits up to a minute for calls in flight; a SIGTERM then
    still ends it within two seconds, and the call it abandoned is answered by the next."""
    memory = Memory.open(store, model=HASH, mode="service", idle_timeout=0)
    memory.remember("acknowledged before the stop")
    pid = owner_info(store)["pid"]
    hold.touch()
    results = []
    in_flight = threading.Thread(target=lambda: results.append(memory.remember("in flight")))
    in_flight.start()
    wait_for(lambda: holding_a_request(store), what="the owner to hold the call")
    asking = threading.Thread(target=stop, args=(store,), kwargs={"timeout": 120})
    asking.start()  # /shutdown: the owner now waits for the held call
    wait_for(lambda: "stopping: stop requested by pid" in (store / "owner.log").read_text(),
             what="the owner to start stopping")
    assert pid_alive(pid)  # still waiting for the call in flight
    signalled = time.monotonic()
    signal_owner(pid, signal.SIGTERM)
    wait_for(lambda: not pid_alive(pid), timeout=10, what="the owner to exit")
    assert time.monotonic() - signalled < 10  # not the minute a stop waits for calls
    asking.join(timeout=60)
    hold.unlink()
    in_flight.join(timeout=60)
    assert results and results[0].text == "in flight"
    memory.close()
    stop(store)
    assert sorted(local_notes(store)) == ["acknowledged before the stop", "in flight"]


# -- item 8: a full disk ----------------------------------------------------------------------

def test_the_owner_serves_while_its_log_cannot_be_written(store):
    """Non-root stand-in for a full disk: the owner's log stream is /dev/full."""
    import http.client

    from nbmemory.service import transport as transports
    from nbmemory.service.protocol import read_info

    with open("/dev/full", "w") as full:
        owner = subprocess.Popen([sys.executable, "-m", "nbmemory.service", "--store",
                                  str(store), "--model", HASH, "--idle-timeout", "0"],
                                 stdout=full, stderr=full)
    try:
        pid = wait_for(lambda: serving(store), timeout=60, what="the owner to serve")
        assert pid == owner.pid
        with Memory.open(store, model=HASH, mode="service") as memory:
            memory.remember("the log is full, the store is not")
            # A call the engine fails on unexpectedly is logged (with a traceback) inside
            # the request: the client still gets its answer.
            address = transports.address_of(store, read_info(store))
            conn = http.client.HTTPConnection("nbmemory", timeout=30)
            conn.sock = address.connect(30)
            conn.request("POST", "/v1/call", body=json.dumps(
                {"operation": "get", "arguments": {"no_such_argument": 1}}).encode(),
                headers={"Content-Type": "application/json", **address.headers()})
            response = conn.getresponse()
            assert response.status == 500
            assert json.loads(response.read())["error"]["type"] == "TypeError"
            conn.close()
            assert memory.recall("store")[0].note.text == "the log is full, the store is not"
            assert owner_info(store)["pid"] == pid
        owner.send_signal(signal.SIGTERM)
        assert owner.wait(timeout=30) == 0
    finally:
        if owner.poll() is None:
            owner.kill()


def test_temporary_files_of_an_owner_that_died_writing_them_are_removed(store):
    store.mkdir(mode=0o700)
    for name in (".owner.json.424242.tmp", ".owner.key.424242.tmp",
                 ".owner.error.json.424242.tmp", ".vectors.usearch.424242.tmp",
                 ".keywords.index.424242.tmp"):  # an index's save cut short too
        (store / name).write_text("")
    with Memory.open(store, model=HASH, mode="service") as memory:
        memory.remember("fresh")
        assert sorted(p.name for p in store.glob(".*.tmp")) == []
    assert "removed .owner." in (store / "owner.log").read_text()
    assert ".vectors.usearch.424242.tmp" in (store / "owner.log").read_text()


@pytest.fixture
def small_disk(tmp_path):
    """A 6 MB tmpfs (root only), unmounted after the test."""
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("needs root to mount a small tmpfs (mount -t tmpfs); "
                    "test_the_owner_serves_while_its_log_cannot_be_written stands in")
    disk = tmp_path / "disk"
    disk.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=6m,mode=0700", "tmpfs",
                              str(disk)], capture_output=True, text=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.strip()}")
    yield disk
    from conftest import stop_owners_under

    stop_owners_under(str(disk))
    subprocess.run(["umount", "-l", str(disk)], check=False)


def fill(disk):
    """Fill ``disk`` to the last byte; the file to remove to free it again."""
    filler = disk / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        for size in (65536, 4096, 1):
            try:
                while True:
                    os.write(fd, b"x" * size)
            except OSError:
                pass
    finally:
        os.close(fd)
    return filler


def test_an_import_on_a_full_disk_blames_the_disk_not_the_file(small_disk, tmp_path):
    """It said the file had a row the store could not take, "damaged or edited by hand":
    a user would throw away a good export."""
    with Memory.open(tmp_path / "source", embedder=HashEmbedder()) as source:
        source.remember_many([f"imported finding {i} " + "z" * 500 for i in range(300)])
        source.export_jsonl(tmp_path / "all.jsonl")
    store = small_disk / "store"
    with Memory.open(store, model=HASH, mode="service") as memory:
        memory.remember("here before the import")
        filler = fill(small_disk)
        with pytest.raises(StoreUnavailable, match=r"failed because the disk holding the store "
                                                   r".* is full \(No space left on device\)"):
            memory.import_jsonl(tmp_path / "all.jsonl")
        filler.unlink()
        assert [n.text for n in memory.notes().notes] == ["here before the import"]
        assert memory.import_jsonl(tmp_path / "all.jsonl")["added"] == 300


def test_a_bulk_remember_on_a_full_disk_says_how_to_send_it_again(small_disk):
    """In a script (the store open in-process) a full disk came as DuckDB's own IOException,
    and the chunks written before it stayed: sent again, they were stored twice."""
    store = small_disk / "store"
    texts = [f"bulk finding {i} " + "w" * 1500 for i in range(600)]
    with Memory.open(store, model=HASH, mode="local") as memory:
        memory.remember("here before the load")
        filler = fill(small_disk)
        with pytest.raises(StoreUnavailable) as caught:
            memory.remember_many(texts)
        said = re.fullmatch(r"a bulk remember failed because the disk holding the store .* is "
                            r"full \(No space left on device\)\. Free some space, then try "
                            r"again; nothing that was acknowledged is lost\. Some of the notes "
                            r"may have been written before it: to write only those missing, "
                            r"send the call again with request_id='([0-9a-f]{32})'\.",
                            str(caught.value))
        assert said, str(caught.value)
        filler.unlink()
        memory.remember_many(texts, request_id=said.group(1))
        assert memory.notes(limit=1).total == 601  # each once


def test_a_full_disk_is_reported_as_such_and_nothing_acknowledged_is_lost(small_disk):
    store = small_disk / "store"
    acknowledged = []
    with Memory.open(store, model=HASH, mode="service") as memory:
        for i in range(5):
            acknowledged.append(memory.remember(f"before the disk filled {i}").text)
        pid = owner_info(store)["pid"]
        filler = fill(small_disk)
        failures = []
        for i in range(40):
            try:
                acknowledged.append(memory.remember(f"on a full disk {i} " + "y" * 2000).text)
            except StoreUnavailable as exc:
                failures.append(str(exc))
        assert failures, "the disk never filled"
        for message in failures:
            assert "may or may not have been applied" not in message
            assert re.search(r"remember failed because the disk holding the store .* is full "
                             r"\(No space left on device\)\. Free some space, then try "
                             r"again; nothing that was acknowledged is lost\.", message), message
        assert owner_info(store)["pid"] == pid  # alive all along
        filler.unlink()
        acknowledged.append(memory.remember("after the disk was freed").text)
        assert owner_info(store)["pid"] == pid
        fill(small_disk)  # full again while the owner stops and saves its index
    stop(store)
    (small_disk / "filler").unlink()
    assert sorted(p.name for p in store.glob(".owner.*.tmp")) == []
    with Memory.open(store, model=HASH, mode="service") as memory:  # the next owner starts
        assert sorted(n.text for n in memory.notes(limit=1000).notes) == sorted(acknowledged)



def test_a_note_stored_while_its_index_files_cannot_be_saved_is_acknowledged_and_found(
        tmp_path, monkeypatch):
    """The commit is the write: index files that cannot be saved after it (a full disk, a
    directory made read-only) are saved later. Reported as failed, the note was written
    twice by the retry, and recall failed on it (KeyError) until a restart."""
    from nbmemory.cards import Cards
    from nbmemory.config import Settings
    from nbmemory.lexical import LexicalIndex
    from nbmemory.vectors import VectorIndex

    tried = []

    def full(index, *args, **kwargs):
        tried.append(type(index).__name__)
        raise OSError(28, "No space left on device")

    store = tmp_path / "store"
    with Memory.open(store, model=HASH, mode="local", settings=Settings(save_every=1)) as memory:
        memory.remember("the ledger closes on the 3rd working day")
        for index in (LexicalIndex, VectorIndex, Cards):
            monkeypatch.setattr(index, "save", full)
        note = memory.remember("orders.amount is in cents before 2021")
        for mode in ("hybrid", "lexical", "dense"):
            assert memory.recall("orders amount cents", mode=mode)[0].note.id == note.id
        # A save costs time in proportion to the store: while the disk stays full each
        # index is tried again after twice as many writes, not after every one.
        tried.clear()
        for n in range(31):
            memory.remember(f"finding {n} while the disk is full")
        # unsaved 2, 4, 8, 16, 32: after writes 1, 3, 7, 15 and 31
        assert sorted(tried) == sorted(["LexicalIndex", "VectorIndex", "Cards"] * 5), tried
        monkeypatch.undo()
    with Memory.open(store, model=HASH, mode="local") as memory:  # the next open catches up
        assert memory.notes().total == 33
        assert memory.recall("orders amount cents", mode="dense")[0].note.id == note.id


def test_a_mistyped_model_does_not_stop_the_owner(store):
    """Replacing the owner for a model this machine does not have would leave the store
    with an owner that cannot load its model: the client says so and nothing stops."""
    with Memory.open(store, model=HASH, mode="service") as first:
        first.remember("orders.amount is in cents")
    pid = owner_info(store)["pid"]
    wait_for(lambda: (owner_info(store) or {}).get("clients", 1) == 0,
             what="the first client's connection to close")
    with Memory.open(store, model="no-such-model", mode="service") as typo:
        with pytest.raises(ModelUnavailable) as caught:
            typo.recall("cents")
    assert str(caught.value) == (
        "The embedding model 'no-such-model' is not on this machine to load offline (a typo, "
        "or not in the Hugging Face cache), so the store's owner keeps 'hash:64' and nothing "
        "was done. Give a model this machine has (as 'hash:64' is), or put the model in the "
        "local Hugging Face cache first.")
    assert owner_info(store)["pid"] == pid and owner_info(store)["model"] == HASH
