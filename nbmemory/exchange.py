"""Export and import in lossless JSON Lines (reading the file: export_file.py; readable Markdown
pages: markdown.py).

The file holds every row of the canonical tables (notes, versions, vectors, the journal,
snapshots, and whatever later migrations add), between a header line and an end line that
counts the rows, so a truncated or foreign file is refused before anything is written.
Importing into an empty store restores it exactly (ids and journal positions included);
importing into a store with notes merges by note uid with an explicit conflict policy, and
importing the same file twice changes nothing. The notes a merge adds keep the file's order of
events, so the file's snapshots divide them as they did; what it changes in this store's notes
(replace) is journalled after them, as of the import.
"""

from __future__ import annotations

import base64
import json
import os
import uuid
from datetime import date, datetime, timezone
from pathlib import Path
from typing import Any, Callable, Iterable

from . import __version__
from .errors import InvalidInput
from .exchange_replace import Journal, as_here, replace
from .export_file import (FORMAT, FORMAT_VERSION, Export, check_export,  # noqa: F401
                          read_export)
from .sharing import Subset
from .store import SCHEMA_VERSION, Store

POLICIES = ("skip", "replace", "keep-both")
# Derived or operational tables that an export leaves out.
NOT_EXPORTED = {"migrations", "meta", "recall_log"}
Progress = Callable[[int, int], None]


def _tables(store: Store) -> dict[str, dict[str, str]]:
    """Canonical tables in dependency-friendly order, each with its column types."""
    tables = {t: c for t, c in store.tables().items() if t not in NOT_EXPORTED}
    first = ["notes", "note_versions", "embeddings", "events", "snapshots"]
    return {t: tables[t] for t in first + sorted(set(tables) - set(first)) if t in tables}


def _encode(value: Any, kind: str) -> Any:
    if value is None:
        return None
    if kind == "BLOB":
        return base64.b64encode(value).decode()
    if isinstance(value, (datetime, date)):
        return value.isoformat()
    return value


def _decode(value: Any, kind: str) -> Any:
    if value is None:
        return None
    if kind == "BLOB":
        return base64.b64decode(value)
    if kind.startswith("TIMESTAMP"):
        return datetime.fromisoformat(value)
    return value


def export_jsonl(store: Store, path: str | Path, *, model: str | None,
                 progress: Progress | None = None, ids: Iterable[int] | None = None,
                 repo: str | None = None) -> dict[str, int]:
    """Write the whole store to ``path``, or only the notes ``ids`` (their versions,
    journal, anchors and vectors; no snapshots; links to other notes left out); returns
    rows written per table; ``repo``: the git checkout their relative paths are in."""
    tables = _tables(store)
    if ids is not None:
        tables = {t: c for t, c in tables.items() if t != "snapshots"}
    total = sum(store.row_count(t) for t in tables)
    counts: dict[str, int] = {}
    path = Path(path)
    if path.exists() and not path.is_file() or path.is_symlink():
        raise InvalidInput(f"Cannot export to {path}: it is not a regular file (a directory, "
                           "a device, a FIFO or a link). Give the path of a file to write.")
    tmp = path.with_name(path.name + ".partial")
    try:  # readable by its owner only, like the store: it holds every note
        tmp.unlink(missing_ok=True)
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0)
        out = os.fdopen(os.open(tmp, flags, 0o600), "w", encoding="utf-8", newline="\n")
    except OSError as exc:
        raise InvalidInput(f"Cannot write the export to {path}: {exc.strerror}. "
                           "Check that its directory exists and is writable.") from None
    keep = None if ids is None else Subset(store, {int(i) for i in ids}, repo)
    try:
        _write_export(out, store, tables, model, counts, progress, total, keep)
    except BaseException:
        tmp.unlink(missing_ok=True)  # a failed export leaves no copy of the store behind
        raise
    tmp.replace(path)
    return counts


def _write_export(out, store: Store, tables: dict, model: str | None, counts: dict,
                  progress: Progress | None, total: int, keep: Subset | None = None) -> None:
    done = 0
    with out:
        out.write(json.dumps({"type": "header", "format": FORMAT, "format_version": FORMAT_VERSION,
                              "nbmemory": __version__, "schema": SCHEMA_VERSION,
                              "model": model, "tables": {t: c for t, c in tables.items()}}) + "\n")
        for table, columns in tables.items():
            names = list(columns)
            counts[table] = 0
            for batch in store.table_rows(table, names):
                for row in batch:
                    record = {n: _encode(v, columns[n]) for n, v in zip(names, row)}
                    if keep is not None and (record := keep.row(table, record)) is None:
                        continue
                    out.write(json.dumps({"type": "row", "table": table, "row": record}) + "\n")
                    counts[table] += 1
                done += len(batch)
                if progress:
                    progress(done, total)
        out.write(json.dumps({"type": "end", "counts": counts}) + "\n")


class _Rows:
    """Rows to insert, grouped by table and columns, written with a few statements; and
    the next free note id and journal position while they wait (one ``INSERT`` and two
    ``max()`` queries per imported note cost milliseconds each)."""

    def __init__(self, store: Store, tables: dict[str, dict[str, str]]):
        self.store, self.tables = store, tables
        self.groups: dict[tuple[str, tuple[str, ...]], list[list[Any]]] = {}
        self.next_id = store.next_note_id()
        self.last_seq = store.position()

    def add(self, table: str, row: dict[str, Any]) -> None:
        columns = self.tables[table]
        names = tuple(n for n in columns if n in row)
        self.groups.setdefault((table, names), []).append([_decode(row[n], columns[n])
                                                           for n in names])

    def note_id(self) -> int:
        self.next_id += 1
        return self.next_id - 1

    def seq(self) -> int:
        self.last_seq += 1
        return self.last_seq

    def flush(self) -> None:
        """Write what waits; then the store may be written directly (and counts again)."""
        for (table, names), rows in self.groups.items():
            self.store.insert_rows(table, names, rows)
        self.groups.clear()
        self.next_id, self.last_seq = self.store.next_note_id(), self.store.position()


def _untrusted(event: dict) -> dict:
    """An imported ``trusted`` event, marked so and without the checks it trusted: trust in
    a check is given in this store, never carried by a file (engine.checking reads the mark;
    a team store refuses a trust in checks that another role wrote)."""
    if event.get("type") != "trusted":
        return event
    data = json.loads(event["data"]) if event.get("data") else {}
    data.pop("checks", None)
    return {**event, "data": json.dumps({**data, "imported": True})}


def restore(store: Store, export: Export, progress: Progress | None = None) -> dict[str, int]:
    """Copy every row into an empty store, ids and journal positions unchanged."""
    tables = _tables(store)
    unknown = sorted(set(export.rows) - set(tables))
    if unknown:
        raise InvalidInput(f"The export has tables this nbmemory does not know ({', '.join(unknown)}); "
                           "upgrade nbmemory to import it.")
    total = sum(len(r) for r in export.rows.values())
    done = 0
    rows = _Rows(store, tables)
    for table in tables:
        for row in export.table(table):
            rows.add(table, _untrusted(row) if table == "events" else row)
        rows.flush()
        done += len(export.rows.get(table, ()))
        if progress:
            progress(done, total)
    return {t: len(r) for t, r in export.rows.items()}


def merge(store: Store, export: Export, *, policy: str, actor: str, now: datetime,
          journal: Journal) -> dict[str, int]:
    """Merge an export into a store that has notes, matching notes by uid. Events this
    store's notes get (edited, superseded, reinstated...) are appended to ``journal``, the
    open entry of the import's transaction, which applies their effects."""
    if policy not in POLICIES:
        raise InvalidInput(f"Unknown conflict policy {policy!r}; use one of: {', '.join(POLICIES)}")
    tables = _tables(store)
    known = store.note_uids()
    versions: dict[int, list[dict]] = {}
    for row in export.table("note_versions"):
        versions.setdefault(row["note_id"], []).append(row)
    events: dict[int | None, list[dict]] = {}
    for row in export.table("events"):
        events.setdefault(row["note_id"], []).append(row)
    # Other per-note tables (anchors, and what later migrations add), by note.
    extras: dict[int, list[tuple[str, dict]]] = {}
    for table in tables:
        if table not in ("notes", "note_versions", "events", "embeddings", "snapshots"):
            for row in export.table(table):
                extras.setdefault(row.get("note_id"), []).append((table, row))
    summary = {"added": 0, "skipped": 0, "replaced": 0, "unchanged": 0, "snapshots": 0,
               "snapshots_skipped": 0}
    id_map: dict[int, int] = {}
    seq_map: dict[int, int] = {}
    source_uid = {row["id"]: row["uid"] for row in export.table("notes")}
    # Journal events naming another note by the file's id: (seq here, data, key).
    links: list[tuple[int, dict, str]] = []
    apart: list[tuple[int, dict, str, int]] = []  # ... naming a note left out, by its uid
    replaced: dict[int, str] = {}  # file id -> what replace() did to this store's note

    def resolve(source_id: int | None) -> int | None:
        """This store's id for a note of the file: the one added now, else the one it had."""
        if source_id in id_map:
            return id_map[source_id]
        return known.get(source_uid.get(source_id))

    pending = _Rows(store, tables)
    before = pending.last_seq

    def remap(seq: int) -> int:
        """The new position of an imported journal position (or of the last one before it)."""
        if seq in seq_map:
            return seq_map[seq]
        return max([v for k, v in seq_map.items() if k <= seq] or [before])

    skipped: dict[int, dict] = {}  # this store's id -> the file's row it kept out
    added: list[dict] = []  # the file's notes that become notes here
    origin: dict[int, str] = {}  # file id -> the uid it copies (keep-both)
    # Made to match the file: this store's note (replace), or an earlier import's copy.
    matched: list[tuple[dict, int]] = []
    mine = store.get_notes([known[r["uid"]] for r in export.table("notes") if r["uid"] in known]
                           ) if policy == "keep-both" else {}
    for row in sorted(export.table("notes"), key=lambda r: r["id"]):
        uid = row["uid"]
        if uid not in known:
            added.append({**row, "id": pending.note_id(), "file_id": row["id"]})
        elif policy == "skip":
            summary["skipped"] += 1
            skipped[known[uid]] = row
        elif policy == "replace":
            matched.append((row, known[uid]))
        elif policy == "keep-both":
            copy_uid = uuid.uuid5(uuid.NAMESPACE_URL, f"nbmemory-copy:{uid}").hex
            if "purged" in (row["status"], store.status_of(known[uid])):
                summary["skipped"] += 1  # a copy would bring an erased text back
            elif copy_uid in known:
                matched.append((row, known[copy_uid]))
            elif as_here(row) == as_here(mine.get(known[uid])):
                summary["unchanged"] += 1  # the same note: nothing to keep both of
            else:
                added.append({**row, "id": pending.note_id(), "file_id": row["id"],
                              "uid": copy_uid})
                origin[row["id"]] = uid
    here = store.get_notes(list(skipped))
    summary["differ"] = sum(1 for note_id, row in skipped.items() if note_id in here and
                            as_here(row) != as_here(here[note_id])
                            and "purged" not in (row["status"], here[note_id].status))
    for row in added:
        id_map[row.pop("file_id")] = row["id"]
        pending.add("notes", {**row, "supersedes": None})
    # The added notes' events keep the file's order, so a snapshot of the file (a
    # position in it) still divides them into before and after.
    for event in sorted((e for file_id in id_map for e in events.get(file_id, [])),
                        key=lambda e: e["seq"]):
        seq = seq_map[event["seq"]] = pending.seq()
        event = _untrusted(event)
        data = json.loads(event["data"]) if event.get("data") else {}
        if event["note_id"] in origin and event["type"] == "created":
            data["imported_from"] = origin[event["note_id"]]
        key = {"created": "supersedes", "superseded_by": "by"}.get(event["type"])
        if key and data.get(key) is not None:
            links.append((seq, data, key))
        if key and data.get(f"{key}_uid"):  # a note shared apart from this one
            apart.append((seq, data, key, event["note_id"]))
        pending.add("events", {**event, "seq": seq, "note_id": id_map[event["note_id"]],
                               "data": json.dumps(data) if data else None})
    for file_id, new_id in id_map.items():
        for version in versions.get(file_id, []):
            pending.add("note_versions", {**version, "note_id": new_id,
                                          "seq": remap(version["seq"])})
        for table, extra in extras.get(file_id, []):
            # Rows tied to a journal position move with the note's events: an anchor's
            # current fingerprint is its row with the highest seq, so a stale position
            # would outrank (or collide with) a later verify in this store.
            moved = {"seq": remap(extra["seq"])} if "seq" in tables[table] else {}
            pending.add(table, {**extra, "note_id": new_id, **moved})
    summary["added"] = sum(row["status"] != "purged" for row in added)  # not an erased one
    pending.flush()  # replace() writes through the journal, after the rows above
    for row, note_id in matched:
        anchors = [extra for table, extra in extras.get(row["id"], []) if table == "anchors"]
        replaced[row["id"]] = replace(store, journal, note_id, row, versions.get(row["id"], []),
                                       anchors, actor, now)
    # Only the vectors of texts kept here: not those of a note skipped, nor of one purged
    # here (a purge erases its vectors for good; an older file must not bring them back).
    missing: dict[str, set[str]] = {}  # model -> hashes of kept texts without its vector
    for row in export.table("embeddings"):
        model = row["model"]
        if model not in missing:
            missing[model] = {h for h, _ in store.texts_missing_embedding(model)}
        if row["content_hash"] in missing[model]:
            missing[model].discard(row["content_hash"])
            pending.add("embeddings", row)
    pending.flush()
    # Supersede links name the file's ids: point them at this store's notes, whether
    # imported now or already here.
    for seq, data, key in links:
        data[key] = resolve(data[key])
        store.set_event_data(seq, data)
    for seq, data, key, file_id in apart:  # the note it names arrived before this one
        other = known.get(data[f"{key}_uid"])
        if other is None:
            continue
        data[key] = other
        store.set_event_data(seq, data)
        new, old = (id_map[file_id], other) if key == "supersedes" else (other, id_map[file_id])
        store.set_supersedes(new, old)
        if store.status_of(old) == "active":
            journal.append("superseded_by", old, actor=actor, at=now,
                           data={"by": new, "imported": True})
    status = {row["id"]: row["status"] for row in export.table("notes")}
    for row in export.table("notes"):
        old, new = resolve(row.get("supersedes")), resolve(row["id"])
        if old is None or new is None:
            continue
        if row["id"] in id_map:
            store.set_supersedes(new, old)
        if (policy == "replace" and row["supersedes"] not in id_map
                and status.get(row["supersedes"]) == "superseded"
                and store.status_of(old) == "active"):
            # The file's version of a note this store has: superseded since, by ``new``.
            journal.append("superseded_by", old, actor=actor, at=now,
                           data={"by": new, "imported": True})
            replaced[row["supersedes"]] = "replaced"
    for outcome in replaced.values():
        summary[outcome] += 1
    here = {s.name: s for s in store.snapshots()}
    for snap in export.table("snapshots"):
        if snap["name"] in here:
            # The same snapshot from an earlier import is no news; another is not taken.
            same = _utc(datetime.fromisoformat(snap["sealed_at"])) == _utc(here[snap["name"]].at)
            if not same:
                summary["snapshots_skipped"] += 1
            continue
        stale = _stale_here(json.loads(snap.get("stale") or "{}"), resolve)
        pending.add("snapshots", {**snap, "seq": remap(snap["seq"]), "stale": json.dumps(stale)})
        summary["snapshots"] += 1
    pending.flush()
    return summary


def _stale_here(stale: dict, resolve: Callable[[int], int | None]) -> dict:
    """A snapshot's stale flags by this store's ids (``resolve``); a team store's by host."""
    out: dict = {}
    for key, value in stale.items():
        if key.startswith("@"):
            out[key] = _stale_here(value, resolve)
        elif (here := resolve(int(key))) is not None:
            out[str(here)] = value
    return out


def _utc(at: datetime) -> datetime:
    return at.astimezone(timezone.utc).replace(tzinfo=None) if at.tzinfo else at
