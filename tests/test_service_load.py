"""Many processes, one store: 4 writer processes x 250 remembers and a reader, all at once.

Writers log every acknowledged note; the reader checks, on every poll, that each note
acknowledged before the poll is listed and that no note it saw before has disappeared.
The other tests kill the owner with SIGKILL in the middle of the load: once, and three
times in a row (one of them an owner that had just started, before it served anything).
"""

import json
import os
import subprocess
import sys
import textwrap
import time

import pytest

from nbmemory.embed import HashEmbedder
from nbmemory.memory import Memory
from nbmemory.service import owner_info, stop
from nbmemory.service.protocol import lock_holder
from nbmemory.store import Filters
from waiting import signal_owner

WRITERS, NOTES = 4, 250

WRITER = textwrap.dedent("""
    import json, sys, traceback
    from nbmemory import Memory
    store, w, n, out = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
    with open(out, "a", buffering=1) as acks:
        try:
            mem = Memory.open(store, model="hash:64", mode="service")
            for i in range(n):
                text = f"writer {w} finding {i}: table w{w}t{i} holds amounts in cents"
                note = mem.remember(text, tags=f"w{w}")
                acks.write(json.dumps({"id": note.id, "text": text}) + "\\n")
        except BaseException:
            acks.write(json.dumps({"error": traceback.format_exc()}) + "\\n")
            sys.exit(1)
""")

READER = textwrap.dedent("""
    import json, os, sys, traceback
    from pathlib import Path
    from nbmemory import Memory
    store, acks, stop_file, out = sys.argv[1], Path(sys.argv[2]), sys.argv[3], sys.argv[4]

    def acknowledged():
        ids = set()
        for path in acks.glob("*.jsonl"):
            for line in path.read_text().splitlines(keepends=True):
                if line.endswith("\\n") and '"id"' in line:
                    ids.add(json.loads(line)["id"])
        return ids

    seen, polls, problems = set(), 0, []
    try:
        mem = Memory.open(store, model="hash:64", mode="service")
        while not os.path.exists(stop_file):
            before = acknowledged()
            # Pages of at most 1,000, oldest first: notes written meanwhile only add pages.
            ids, offset = set(), 0
            while True:
                page = mem.notes(limit=1000, offset=offset, order="oldest")
                ids |= {n.id for n in page.notes}
                offset += len(page.notes)
                if len(page.notes) < 1000:
                    break
            if len(ids) != page.total:
                problems.append(f"poll {polls}: listed {len(ids)} of {page.total}")
            if before - ids:
                problems.append(f"poll {polls}: acknowledged but not listed {sorted(before - ids)[:5]}")
            if seen - ids:
                problems.append(f"poll {polls}: disappeared {sorted(seen - ids)[:5]}")
            seen |= ids
            mem.recall(f"writer {polls % 4} finding table", k=5)
            polls += 1
    except BaseException:
        problems.append(traceback.format_exc())
    Path(out).write_text(json.dumps({"polls": polls, "seen": len(seen), "problems": problems[:20]}))
""")


def spawn(code, *args):
    return subprocess.Popen([sys.executable, "-c", code, *map(str, args)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "HF_HUB_OFFLINE": "1"})


def acked(ack_dir):
    rows = []
    for path in sorted(ack_dir.glob("*.jsonl")):
        rows += [json.loads(line) for line in path.read_text().splitlines(keepends=True)
                 if line.endswith("\n")]  # a line still being written is not acknowledged
    return rows


def wait_until(condition, what, timeout=120):
    deadline = time.monotonic() + timeout
    while not (value := condition()):
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.01)
    return value


def kill_serving_owner(store, ack_dir, acks):
    """Once ``acks`` notes are acknowledged, SIGKILL the owner serving them."""
    wait_until(lambda: len(acked(ack_dir)) >= acks, "the writers to make progress")
    pid = wait_until(lambda: (info := owner_info(store) or {}).get("mode") == "service"
                     and info["pid"], "an owner serving them")
    signal_owner(pid)
    return pid


def kill_next_owner_at_once(store, killed):
    """SIGKILL the next process to take the store's lock as soon as it has written its pid."""
    pid = wait_until(lambda: (h := lock_holder(store)) and h.pid not in (None, *killed)
                     and h.pid, "a new owner to take the lock")
    signal_owner(pid)
    return pid


def run_load(store, tmp_path, kills=()):
    """Run the load; ``kills`` are called one after another meanwhile, each with
    (store, ack directory, pids killed so far) and returning the pid it killed."""
    ack_dir, stop_file, report = tmp_path / "acks", tmp_path / "stop", tmp_path / "reader.json"
    ack_dir.mkdir()
    reader = spawn(READER, store, ack_dir, stop_file, report)
    writers = [spawn(WRITER, store, w, NOTES, ack_dir / f"w{w}.jsonl") for w in range(WRITERS)]
    killed = []
    try:
        for kill in kills:
            killed.append(kill(store, ack_dir, killed))
        for writer in writers:
            _, err = writer.communicate(timeout=300)
            assert writer.returncode == 0, err
    finally:
        stop_file.touch()
        for proc in [reader, *writers]:
            try:
                proc.wait(timeout=120)
            except subprocess.TimeoutExpired:
                proc.kill()
    assert reader.returncode == 0, reader.stderr.read()
    return acked(ack_dir), json.loads(report.read_text()), killed


def check_store(store, rows):
    """Every acknowledged note is there exactly once, and the indexes agree with DuckDB."""
    assert stop(store, timeout=60)
    with Memory.open(store, embedder=HashEmbedder(), mode="local") as mem:
        engine = mem._backend.engine
        assert engine.index_state == "loaded"
        stored = dict(engine.store.con.execute(
            "SELECT v.text, list(n.id) FROM notes n JOIN note_versions v ON v.note_id = n.id "
            "GROUP BY v.text").fetchall())
        assert {text: ids for text, ids in stored.items()} == \
            {r["text"]: [r["id"]] for r in rows}
        everything = Filters(statuses=("active", "revoked", "superseded"))
        ids = set(engine.store.note_ids(everything).tolist())
        assert set(engine.vectors.keys().tolist()) == ids
        assert len(engine.lexical) == len(ids) == WRITERS * NOTES
        assert mem.recall("writer 3 finding 249 table w3t249")[0].note.text.startswith(
            "writer 3 finding 249:")


@pytest.fixture
def store(store_dir):
    yield store_dir
    stop(store_dir, timeout=60)


def test_four_writers_and_a_reader(store, tmp_path):
    rows, reader, _ = run_load(store, tmp_path)
    assert [r for r in rows if "error" in r] == []
    assert len(rows) == WRITERS * NOTES and len({r["id"] for r in rows}) == len(rows)
    assert reader["problems"] == [] and reader["polls"] >= 5
    assert (store / "owner.log").read_text().count(": serving ") == 1  # five clients, one owner
    check_store(store, rows)


def test_four_writers_and_a_reader_survive_kill_9_of_the_owner(store, tmp_path):
    rows, reader, (killed,) = run_load(store, tmp_path, kills=[
        lambda store, acks, _: kill_serving_owner(store, acks, WRITERS * NOTES // 3)])
    assert [r for r in rows if "error" in r] == []
    assert len(rows) == WRITERS * NOTES and len({r["id"] for r in rows}) == len(rows)
    assert reader["problems"] == [] and reader["polls"] >= 5
    log = (store / "owner.log").read_text()
    assert f"nbmemory owner {killed}: serving" in log and log.count(": serving ") == 2
    assert owner_info(store)["pid"] != killed
    check_store(store, rows)


def test_four_writers_and_a_reader_survive_three_owner_kills_in_a_row(store, tmp_path):
    """Issue 18 item 9: every write is resent until an owner answers it (no count runs
    out), each acknowledged write is stored once, and no writer sees an error."""
    rows, reader, killed = run_load(store, tmp_path, kills=[
        lambda store, acks, _: kill_serving_owner(store, acks, WRITERS * NOTES // 4),
        lambda store, _, killed: kill_next_owner_at_once(store, killed),
        lambda store, acks, _: kill_serving_owner(store, acks, WRITERS * NOTES // 2)])
    assert [r for r in rows if "error" in r] == []
    assert len(rows) == WRITERS * NOTES and len({r["id"] for r in rows}) == len(rows)
    assert reader["problems"] == [] and reader["polls"] >= 5
    assert len(set(killed)) == 3 and owner_info(store)["pid"] not in killed
    check_store(store, rows)
