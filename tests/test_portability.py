"""What Windows and macOS do differently, emulated on Linux where it can be.

The owner's locks and transport have their own (tests/test_transport.py). Here: Windows
flushes only a file open for writing and opens files in text mode unless told otherwise,
consoles and pipes there write in a legacy code page, and a store may live under a path
holding an apostrophe (C:\\Users\\O'Brien).
"""

import errno
import json
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

import nbmemory.lock
from nbmemory.embed import HashEmbedder
from nbmemory.memory import Memory

ENTRY = shutil.which("nbmemory", path=str(Path(sys.executable).parent)) or "nbmemory"


def test_a_store_opens_where_only_a_file_open_for_writing_can_be_flushed(tmp_path, monkeypatch):
    """Windows' fsync (FlushFileBuffers) needs write access: every index save flushed a
    read-only handle, so no store could even be created there."""
    fcntl = pytest.importorskip("fcntl")  # emulates Windows where there is fcntl to ask
    flush = os.fsync

    def windows_fsync(fd):
        if not stat.S_ISDIR(os.fstat(fd).st_mode) and \
                fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_ACCMODE == os.O_RDONLY:
            raise OSError(errno.EBADF, "Bad file descriptor")
        return flush(fd)

    monkeypatch.setattr(os, "fsync", windows_fsync)
    with Memory.open(tmp_path / "store", embedder=HashEmbedder()) as memory:
        note = memory.remember("orders.amount is in cents before 2021")
        assert memory.recall("orders amount cents")[0].note.id == note.id


def test_files_nbmemory_writes_itself_are_opened_in_binary_mode(tmp_path, monkeypatch):
    """Without O_BINARY Windows opens a file in text mode, and every line of the store's
    .gitignore or an export written through it ended "\\r\\r\\n": git then tracked the
    database, and the export could not be imported."""
    binary = 0x8000  # Windows' value; on Linux the same bit is O_LARGEFILE, harmless here
    opened = {}
    real_open = os.open

    def recording_open(path, flags, *args, **kwargs):
        opened[Path(path).name] = flags
        return real_open(path, flags, *args, **kwargs)

    monkeypatch.setattr(os, "O_BINARY", binary, raising=False)
    monkeypatch.setattr(nbmemory.lock, "O_BINARY", binary)
    monkeypatch.setattr(os, "open", recording_open)
    (tmp_path / ".git").mkdir()  # the store's directory gets a .gitignore inside a repository
    with Memory.open(tmp_path / ".nbmemory", embedder=HashEmbedder(), mode="local") as memory:
        memory.remember("orders.amount is in cents before 2021")
        memory.export_jsonl(tmp_path / "notes.jsonl")
    written = {name: flags for name, flags in opened.items()
               if flags & (os.O_WRONLY | os.O_RDWR)}
    assert {".gitignore", "notes.jsonl.partial"} <= set(written), sorted(written)
    assert [name for name, flags in written.items() if not flags & binary] == []
    assert (tmp_path / ".nbmemory" / ".gitignore").read_bytes().count(b"\r") == 0


def test_purge_works_in_a_store_under_a_path_with_an_apostrophe(tmp_path):
    """Purge rewrites the database through SQL naming the file: C:\\Users\\O'Brien broke
    it, and the erased text stayed in the file's free blocks."""
    store = tmp_path / "O'Brien" / "store"
    with Memory.open(store, embedder=HashEmbedder(), mode="local") as memory:
        note = memory.remember("the vendor's API key was pasted here by mistake")
        memory.purge(note.id)
    assert b"pasted here by mistake" not in (store / "memory.duckdb").read_bytes()


def test_the_cli_writes_what_a_legacy_code_page_cannot_show_escaped(tmp_path):
    """A Windows console or pipe in cp1252: a note holding a character it has no code
    for ended the command with "unexpected UnicodeEncodeError"."""
    env = {**os.environ, "NBMEMORY_MODEL": "hash:64", "HF_HUB_OFFLINE": "1",
           "PYTHONIOENCODING": "cp1252"}

    def nbm(*argv):
        return subprocess.run([ENTRY, "--store", str(tmp_path / "store"), *argv],
                              capture_output=True, env=env, timeout=300)

    try:
        done = nbm("remember", "refunds ≥ 100 € need a second approver (see 審査)")
        assert done.returncode == 0, done.stderr
        done = nbm("recall", "refunds approver")
        assert done.returncode == 0, done.stderr
        assert ("refunds \\u2265 100 € need a second approver (see \\u5be9\\u67fb)"
                in done.stdout.decode("cp1252"))
        done = nbm("recall", "--json", "refunds approver")
        assert done.returncode == 0, done.stderr
        hits = json.loads(done.stdout.decode("cp1252"))
        assert "refunds ≥ 100 € need a second approver (see 審査)" in json.dumps(
            hits, ensure_ascii=False)
    finally:
        nbm("stop")
