"""How processes reach a store's owner on every platform, as far as Linux can show it.

A unix socket where the platform can name a peer's user, else loopback TCP with the
owner's secret; long store paths; the secret refused when wrong or missing; and a Python
without ``fcntl`` and ``AF_UNIX`` (as on Windows, simulated) doing a remember/recall round
trip through the magics. macOS's ``LOCAL_PEERCRED`` and Windows' ``msvcrt`` locks cannot
run here: their parsing and their calls are exercised with stand-ins.
"""

import contextlib
import http.client
import json
import os
import re
import shutil
import socket
import stat
import struct
import subprocess
import sys
import tempfile
import textwrap

import pytest

from nbmemory.doctor import check_store
from nbmemory.errors import InvalidInput, StoreLocked, StoreUnavailable
from nbmemory.memory import Memory
from nbmemory.service import owner_info, stop
from nbmemory.service import transport as transports
from nbmemory.service.protocol import lock_held, read_info, write_info

HASH = "hash:64"


@pytest.fixture
def store(store_dir):
    yield store_dir
    with contextlib.suppress(StoreLocked):
        stop(store_dir, timeout=30)


@pytest.fixture
def tcp(monkeypatch):
    monkeypatch.setenv("NBMEMORY_TRANSPORT", "tcp")


@pytest.fixture
def runtime(monkeypatch):
    """A short private temporary directory of its own (the unix socket's fallback place)."""
    base = tempfile.mkdtemp(prefix="nbm")
    monkeypatch.delenv("XDG_RUNTIME_DIR", raising=False)
    monkeypatch.setenv("TMPDIR", base)
    monkeypatch.setattr(tempfile, "tempdir", base)
    yield base
    shutil.rmtree(base, ignore_errors=True)


def request(store, method, path, headers, body=None):
    """One request on the owner's address with exactly ``headers`` (no secret added)."""
    address = transports.address_of(store, read_info(store))
    conn = http.client.HTTPConnection("nbmemory", timeout=30)
    conn.sock = address.connect(30)
    try:
        conn.request(method, path, body=json.dumps(body).encode() if body else None,
                     headers={"Content-Type": "application/json", **headers})
        response = conn.getresponse()
        return response.status, json.loads(response.read())
    finally:
        conn.close()


# -- choosing ------------------------------------------------------------------------------

def test_the_default_here_is_a_unix_socket_with_the_peer_checked():
    assert transports.peer_check() == "SO_PEERCRED"  # these machines are Linux
    assert transports.choose({}) == transports.choose({"NBMEMORY_TRANSPORT": "auto"}) == "unix"
    assert transports.choose({"NBMEMORY_TRANSPORT": " TCP "}) == "tcp"


def test_a_bad_transport_setting_says_what_to_write(store, monkeypatch):
    monkeypatch.setenv("NBMEMORY_TRANSPORT", "pigeon")
    with pytest.raises(InvalidInput, match=r"NBMEMORY_TRANSPORT='pigeon' is not a transport; "
                                           r"set it to unix or tcp, or unset it for this "
                                           r"platform's default \(unix\)\."):
        Memory.open(store, model=HASH, mode="service")
    assert not lock_held(store)


def test_the_peer_check_names_our_own_uid():
    left, right = socket.socketpair(socket.AF_UNIX)
    with left, right:
        assert transports.peer_uid(left) == os.getuid()


def test_a_macos_xucred_gives_the_peer_uid():
    """struct xucred {u_int cr_version; uid_t cr_uid; short cr_ngroups; gid_t groups[16]}."""
    xucred = struct.pack("=IIh2x16I", 0, 501, 2, 20, 12, *[0] * 14)
    assert transports.parse_xucred(xucred) == 501
    with pytest.raises(OSError, match="struct xucred version 7"):
        transports.parse_xucred(struct.pack("=IIh2x16I", 7, 501, 0, *[0] * 16))
    with pytest.raises(OSError, match="returned 4 bytes"):
        transports.parse_xucred(b"\0" * 4)


# -- the secret ----------------------------------------------------------------------------

def test_requests_without_the_secret_are_refused_and_logged(store, tcp):
    with Memory.open(store, model=HASH, mode="service") as memory:
        memory.remember("orders.amount is in cents")
        call = {"operation": "remember", "arguments": {"text": "written without the secret"}}
        status, payload = request(store, "GET", "/hello", {})
        assert status == 403 and payload["error"]["type"] == "Unauthorized"
        assert payload["error"]["message"] == (
            "The store's owner refused a request with no secret: every request must carry "
            "the secret from owner.key in the store directory in the X-NbMemory-Secret header.")
        assert "store" not in payload  # nothing about the store leaks
        status, payload = request(store, "POST", "/v1/call", {"X-NbMemory-Secret": "0" * 64},
                                  call)
        assert status == 403 and "with a wrong secret" in payload["error"]["message"]
        status, _ = request(store, "POST", "/shutdown", {}, {"reason": "a stranger"})
        assert status == 403
        assert memory.notes().total == 1  # nothing was written, the owner still serves
        log = (store / "owner.log").read_text()
        assert "refused GET /hello from 127.0.0.1:" in log and "with no secret" in log
        assert "refused POST /v1/call from 127.0.0.1:" in log and "with a wrong secret" in log


def test_a_client_with_a_wrong_secret_is_told_what_to_do(store, tcp):
    with Memory.open(store, model=HASH, mode="service") as first:
        first.remember("orders.amount is in cents")
        pid = owner_info(store)["pid"]
        transports.write_secret(store, transports.new_secret())  # not the owner's any more
        with pytest.raises(StoreUnavailable) as caught:
            Memory.open(store, model=HASH, mode="service").recall("cents")
        assert str(caught.value) == (
            f"The owner of {store} (pid {pid}) refused this process's requests: the secret in "
            f"{store / 'owner.key'} is not the one it was started with (was the file "
            f"changed?). Restart it: nbmemory stop --store {store}; the next use starts a "
            f"new one.")
    assert stop(store) is True  # refused too, so it is sent SIGTERM
    assert not lock_held(store)
    with Memory.open(store, model=HASH, mode="service") as memory:  # a new owner, a new key
        assert memory.recall("cents")[0].note.text == "orders.amount is in cents"


def test_a_missing_secret_file_is_named(store, tcp):
    with Memory.open(store, model=HASH, mode="service") as first:
        first.remember("orders.amount is in cents")
        (store / "owner.key").unlink()
        with pytest.raises(StoreUnavailable, match=r"serves loopback TCP, but its secret "
                                                   r"\(.*owner\.key\) is missing or not "
                                                   r"yours.*nbmemory stop --store"):
            Memory.open(store, model=HASH, mode="service").notes()
        assert first.notes().total == 1  # a client that had connected keeps its way in


def test_a_dead_owners_port_taken_by_another_process_gets_nothing(store, tcp):
    """An owner killed leaves owner.json naming its port, which any local process may then
    listen on: no request (and no secret) goes there, and a new owner starts."""
    from waiting import pid_alive, signal_owner, wait_for

    with Memory.open(store, model=HASH, mode="service") as first:
        first.remember("orders.amount is in cents")
        info = owner_info(store)
        signal_owner(info["pid"])
        wait_for(lambda: not pid_alive(info["pid"]) and not lock_held(store), what="owner gone")
    squatter = socket.socket()
    squatter.bind((transports.LOOPBACK, 0))
    squatter.listen(8)
    squatter.setblocking(False)
    # The old port itself stays in TIME_WAIT a while: the listener takes another, which
    # owner.json is made to name, as it would name the old port taken over.
    assert read_info(store)["port"] == info["port"]  # left behind
    write_info(store, {**info, "port": squatter.getsockname()[1]})
    try:
        with Memory.open(store, model=HASH, mode="service") as memory:
            memory.remember("the payroll password rotates monthly")
            assert memory.notes().total == 2
        assert owner_info(store)["pid"] != info["pid"]
        with pytest.raises(BlockingIOError):
            squatter.accept()  # nobody connected
    finally:
        squatter.close()


def test_a_tcp_connection_without_a_request_is_closed_and_one_with_the_secret_may_idle(
        monkeypatch):
    """Any local process may connect to loopback TCP: one that never sends a request with
    the secret is dropped after a while instead of holding a thread of the owner for good."""
    import threading
    import types

    from nbmemory.service import handler

    monkeypatch.setattr(handler, "UNPROVEN_TIMEOUT_S", 0.3)
    seen = []
    owner = types.SimpleNamespace(connected=lambda *a: seen.append(a),
                                  disconnected=lambda *a: None, progress={},
                                  hello=lambda: {"state": "serving"})
    server = handler.Server((transports.LOOPBACK, 0), owner, secret="s" * 64)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        address = ("127.0.0.1", server.server_address[1])
        with socket.create_connection(address, timeout=30) as idle:
            assert idle.recv(1) == b""  # closed by the owner, not by this 30 s timeout
        conn = http.client.HTTPConnection(*address, timeout=30)
        conn.request("GET", "/hello", headers={transports.HEADER_SECRET: "s" * 64})
        assert conn.getresponse().read() == b'{"state": "serving"}'
        threading.Event().wait(0.6)  # idle past the unproven timeout: still served
        conn.request("GET", "/hello", headers={transports.HEADER_SECRET: "s" * 64})
        assert conn.getresponse().status == 200
        conn.close()
        # A client that gave up before its answer is a line in the log, not a traceback.
        logged = []
        monkeypatch.setattr(handler, "log", logged.append)
        try:
            raise BrokenPipeError(32, "Broken pipe")
        except BrokenPipeError:
            server.handle_error(None, address)
        assert logged == ["a client left before its answer (BrokenPipeError)"]
    finally:
        server.shutdown()
        server.server_close()


def test_on_windows_the_secret_is_written_only_once_its_file_is_the_users_alone(
        tmp_path, monkeypatch):
    """Without POSIX permissions the file is restricted (icacls) while still empty."""
    sizes = []
    monkeypatch.setattr(transports, "POSIX_PERMISSIONS", False)
    monkeypatch.setattr(transports, "restrict_to_user",
                        lambda path: sizes.append(path.stat().st_size))
    transports.write_secret(tmp_path, "s" * 64)
    assert sizes == [0] and transports.read_secret(tmp_path) == "s" * 64


# -- long store paths ----------------------------------------------------------------------

def long_store(tmp_path):
    store = tmp_path / ("d" * 60) / ("e" * 60) / "store"
    assert len(os.fsencode(str(store / "owner.sock"))) > 120
    return store


@pytest.mark.parametrize("transport", ["unix", "tcp"])
def test_long_store_paths_work_on_both_transports(tmp_path, monkeypatch, runtime, transport):
    monkeypatch.setenv("NBMEMORY_TRANSPORT", transport)
    store = long_store(tmp_path)
    try:
        with Memory.open(store, model=HASH, mode="service") as memory:
            assert memory.remember("deep stores work").id == 1
            assert memory.recall("deep stores")[0].note.id == 1
            info = owner_info(store)
            assert info["transport"] == transport
            assert not (store / "owner.sock").exists()
            if transport == "unix":  # in the private runtime directory, named by a hash
                path = info["socket"]
                assert path.startswith(os.path.join(runtime, f"nbmemory-{os.getuid()}", ""))
                assert len(os.fsencode(path)) <= 100 and path.endswith(".sock")
                assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
                assert stat.S_IMODE(os.stat(os.path.dirname(path)).st_mode) == 0o700
            else:
                assert info["port"] > 0 and info["socket"] is None
    finally:
        stop(store)
    if transport == "unix":
        assert not os.path.exists(path)  # a clean exit removes the socket


def test_the_runtime_directory_is_preferred_and_must_be_private(tmp_path, monkeypatch, runtime):
    store = long_store(tmp_path)
    xdg = os.path.join(runtime, "run")
    os.mkdir(xdg, 0o700)
    assert str(transports.socket_path(store, {"XDG_RUNTIME_DIR": xdg})).startswith(
        os.path.join(xdg, "nbmemory", ""))
    assert stat.S_IMODE(os.stat(os.path.join(xdg, "nbmemory")).st_mode) == 0o700
    # A runtime directory that is a symlink (someone else's place) is not used.
    elsewhere = os.path.join(runtime, "elsewhere")
    os.mkdir(elsewhere, 0o700)
    os.symlink(elsewhere, os.path.join(runtime, f"nbmemory-{os.getuid()}"))
    assert transports.socket_path(store, {}) is None
    # A short store keeps its socket where it always was.
    assert transports.socket_path(tmp_path / "s", {}) == tmp_path / "s" / "owner.sock"


def test_without_a_short_private_socket_path_the_owner_serves_tcp(tmp_path, monkeypatch):
    long_tmp = tmp_path / ("t" * 100)
    long_tmp.mkdir()
    monkeypatch.delenv("XDG_RUNTIME_DIR", raising=False)
    monkeypatch.setenv("TMPDIR", str(long_tmp))
    store = long_store(tmp_path)
    try:
        with Memory.open(store, model=HASH, mode="service") as memory:
            assert memory.remember("served on TCP after all").id == 1
            assert owner_info(store)["transport"] == "tcp"
        assert "serving TCP instead" in (store / "owner.log").read_text()
    finally:
        stop(store)


# -- doctor --------------------------------------------------------------------------------

@pytest.mark.parametrize("transport, says", [
    ("unix", r"unix socket .*owner\.sock; the owner refuses processes of other users "
             r"\(SO_PEERCRED\)"),
    ("tcp", r"loopback TCP 127\.0\.0\.1:\d+; every request carries the owner's secret from "
            r"owner\.key \(owner-only\), compared in constant time"),
])
def test_doctor_reports_the_transport_and_what_protects_it(store, monkeypatch, transport, says):
    monkeypatch.setenv("NBMEMORY_TRANSPORT", transport)
    with Memory.open(store, model=HASH, mode="service") as memory:
        memory.remember("a finding")
        checks = {c.name: c for c in check_store(str(store), HASH)}
        assert checks["transport"].status == "ok"
        assert re.fullmatch(says, checks["transport"].detail), checks["transport"].detail
        if transport == "tcp":
            os.chmod(store / "owner.key", 0o644)
            check = {c.name: c for c in check_store(str(store), HASH)}["transport"]
            assert check.status == "fail" and "other users may read" in check.detail
            assert check.fix.startswith(f"chmod 600 {store / 'owner.key'}")
    stop(store)
    owner = {c.name: c for c in check_store(str(store), HASH)}["owner"]
    assert owner.detail.startswith("no process has the store open; an owner starts on "
                                   + ("a unix socket" if transport == "unix" else "loopback TCP"))


# -- a Python without fcntl and AF_UNIX (as on Windows) ------------------------------------

# Loaded by every process started with it on PYTHONPATH, the owner included: `import fcntl`
# fails and socket has no AF_UNIX, as on Windows. With `msvcrt=True`, a stand-in for
# Windows' msvcrt.locking (built on the real flock, so that it excludes the owners of other
# processes here) lets nbmemory take its Windows code path.
SITECUSTOMIZE = """
import errno, socket, sys, types
import fcntl as _real_fcntl
import subprocess  # before the stand-in msvcrt: subprocess takes msvcrt to mean Windows

sys.modules["fcntl"] = None
del socket.AF_UNIX
if {msvcrt}:
    msvcrt = types.ModuleType("msvcrt")
    msvcrt.LK_UNLCK, msvcrt.LK_NBLCK = 0, 2

    def locking(fd, mode, nbytes):
        if mode == msvcrt.LK_UNLCK:
            return _real_fcntl.flock(fd, _real_fcntl.LOCK_UN)
        try:
            _real_fcntl.flock(fd, _real_fcntl.LOCK_EX | _real_fcntl.LOCK_NB)
        except BlockingIOError:
            raise PermissionError(errno.EACCES, "Permission denied") from None

    msvcrt.locking = locking
    sys.modules["msvcrt"] = msvcrt
"""

KERNEL = """
import json, socket, sys
from IPython.core.interactiveshell import InteractiveShell
import nbmemory.service.client, nbmemory.magics, nbmemory.lock
ip = InteractiveShell.instance(history_length=0)
ip.run_line_magic("load_ext", "nbmemory")
ip.run_line_magic("config", f"NbMemory.store = {sys.argv[1]!r}")
ip.run_line_magic("config", "NbMemory.model = 'hash:64'")
ip.run_line_magic("remember", "-t orders orders.amount is in cents before 2021")
hits = ip.run_line_magic("recall", "orders amount cents")
print(json.dumps({"fcntl": sys.modules.get("fcntl") is not None,
                  "af_unix": hasattr(socket, "AF_UNIX"),
                  "lock": nbmemory.lock.locking_name(), "first": hits[0].note.text}))
"""


def without_fcntl_and_af_unix(tmp_path, msvcrt):
    site = tmp_path / ("site-msvcrt" if msvcrt else "site-bare")
    site.mkdir()
    (site / "sitecustomize.py").write_text(textwrap.dedent(SITECUSTOMIZE.format(msvcrt=msvcrt)))
    environ = {k: v for k, v in os.environ.items() if k != "NBMEMORY_TRANSPORT"}
    path = os.pathsep.join(p for p in (str(site), environ.get("PYTHONPATH")) if p)
    return {**environ, "PYTHONPATH": path, "HF_HUB_OFFLINE": "1"}


def test_without_fcntl_and_af_unix_the_magics_round_trip_over_tcp(tmp_path, store):
    environ = without_fcntl_and_af_unix(tmp_path, msvcrt=True)
    result = subprocess.run([sys.executable, "-c", textwrap.dedent(KERNEL), str(store)],
                            capture_output=True, text=True, timeout=300, env=environ)
    assert result.returncode == 0, result.stderr
    kernel = json.loads(result.stdout.strip().splitlines()[-1])
    assert kernel == {"fcntl": False, "af_unix": False, "lock": "msvcrt",
                      "first": "orders.amount is in cents before 2021"}
    info = owner_info(store)  # the owner runs without them too, and holds its lock
    assert info["transport"] == "tcp" and info["auth"] == "secret (owner.key)"
    assert info["lock"] == "msvcrt"  # elected through the Windows code path
    assert lock_held(store) and not (store / "owner.sock").exists()
    assert stat.S_IMODE(os.stat(store / "owner.key").st_mode) == 0o600
    assert f"on loopback TCP 127.0.0.1:{info['port']}" in (store / "owner.log").read_text()


def test_without_any_file_lock_the_error_says_so(tmp_path, store):
    environ = without_fcntl_and_af_unix(tmp_path, msvcrt=False)
    result = subprocess.run([sys.executable, "-c", textwrap.dedent("""
        import sys
        import nbmemory.service.client, nbmemory.magics  # importing works anywhere
        from nbmemory import Memory
        from nbmemory.errors import StoreUnavailable
        try:
            Memory.open(sys.argv[1], model="hash:64", mode="service").remember("x")
        except StoreUnavailable as exc:
            print(exc)
        """), str(store)], capture_output=True, text=True, timeout=120, env=environ)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == (
        "This Python offers no file locks (neither fcntl nor msvcrt), so nbmemory cannot make "
        "sure only one process owns a store. Use a CPython build for Linux, macOS or Windows.")


def test_a_file_system_that_cannot_lock_is_said_in_words(store, monkeypatch):
    """NFS without its lock service answers flock with ENOLCK: said, not a traceback."""
    import errno
    import fcntl

    def no_locks(fd, operation):
        raise OSError(errno.ENOLCK, "No locks available")

    monkeypatch.setattr(fcntl, "flock", no_locks)
    with pytest.raises(StoreUnavailable) as caught:
        Memory.open(store, model=HASH, mode="local")
    assert str(caught.value) == (
        "The store's file system cannot lock files (No locks available), and nbmemory keeps "
        "writers apart with file locks. Keep the store on a local disk (--store, "
        "NBMEMORY_HOME or NbMemory.store).")


@pytest.mark.parametrize("transport", ["unix", "tcp"])
def test_a_store_copied_while_its_owner_runs_is_a_store_of_its_own(
        tmp_path, monkeypatch, transport):
    """cp -r of a project while its kernel runs copies owner.json, which names the running
    owner: the copy's writes went to the original store until that owner exited."""
    monkeypatch.setenv("NBMEMORY_TRANSPORT", transport)
    original, copy = tmp_path / "project" / ".nbmemory", tmp_path / "copy" / ".nbmemory"
    try:
        with Memory.open(original, model=HASH, mode="service") as memory:
            memory.remember("orders.amount is in cents")
            shutil.copytree(original.parent, copy.parent,  # (cp -a copies the socket too)
                            ignore=shutil.ignore_patterns("*.sock"))
            assert read_info(copy)["pid"] == owner_info(original)["pid"]
            with Memory.open(copy, model=HASH, mode="service") as duplicate:
                duplicate.remember("a note for the copy only")
                assert duplicate.notes().total == 2
                assert owner_info(copy)["pid"] != owner_info(original)["pid"]
            assert [n.text for n in memory.notes().notes] == ["orders.amount is in cents"]
    finally:
        for store in (original, copy):
            with contextlib.suppress(StoreLocked):
                stop(store, timeout=30)


def test_a_connection_that_times_out_is_not_sent(tmp_path, monkeypatch):
    """Over TCP a full listen backlog times the connect out: nothing was sent, so the call
    may go again (it was reported as a call not answered, and crashed long work)."""
    from nbmemory.service import wire

    def times_out(timeout):
        raise TimeoutError("timed out")

    monkeypatch.setattr(transports.Address, "connect", lambda self, timeout: times_out(timeout))
    address = transports.Address("tcp", port=1, secret="s")
    monkeypatch.setattr(transports, "find", lambda directory: address)
    with pytest.raises(wire.NotSent, match="timed out"):
        wire.connect(tmp_path, 1.0)
