"""How an import makes a note of this store match the file's (``replace``, and keep-both's
earlier copy of it): a new version, the file's current anchors, its answer or status, each
journalled as of the import; and what two versions of a note are compared by."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Protocol

from .models import Anchor, Provenance
from .store import Store


class Journal(Protocol):
    """Where a merge appends the events it gives this store's notes (the engine's open
    journal entry, which applies each event's effect: nbmemory.events)."""

    def append(self, type: str, note_id: int | None, *, actor: str | None, at: datetime,
               request_id: str | None = None, data: dict | None = None) -> int: ...


def _current_anchors(rows: list[dict]) -> list[Anchor]:
    """The file's current anchors of one note: per position its row with the highest seq."""
    latest: dict[int, dict] = {}
    for row in rows:
        if row["position"] not in latest or row["seq"] > latest[row["position"]]["seq"]:
            latest[row["position"]] = row
    anchors = []
    for row in latest.values():
        fingerprint = row["fingerprint"]
        fingerprint = json.loads(fingerprint) if isinstance(fingerprint, str) else fingerprint
        if not fingerprint.get("dropped"):
            anchors.append(Anchor(row["kind"], row["target"], fingerprint, row["origin"]))
    return anchors


def _anchor_key(anchor: Anchor) -> tuple[str, str, str]:
    return anchor.kind, anchor.target, json.dumps(anchor.fingerprint, sort_keys=True)


def as_here(note) -> tuple | None:
    """What an import compares of a note (the file's row, or a Note of this store): its
    text, kind, priority, tags, status and a question's answer."""
    if note is None:
        return None
    if isinstance(note, dict):
        return (note["text"], note["kind"], note["priority"], tuple(note["tags"]),
                note["status"], note.get("resolution") or None)
    return (note.text, note.kind, note.priority, tuple(note.tags), note.status,
            note.resolution)


def replace(store: Store, journal: Journal, note_id: int, row: dict, versions: list[dict],
             anchor_rows: list[dict],
             actor: str, now: datetime) -> str:
    """Make the store's note match the file's current version, as a new version, with the
    file's current anchors (fingerprints are added, never overwritten)."""
    current = store.get_notes([note_id])[note_id]
    latest = max(versions, key=lambda v: v["version"]) if versions else None
    # Purged on either side: an erased text never comes back, nor does an import erase one.
    if latest is None or "purged" in (current.status, row["status"]):
        return "skipped"
    fields = (latest["text"], latest["kind"], latest["priority"], tuple(latest["tags"]))
    same = fields == (current.text, current.kind, current.priority, current.tags)
    mine = store.anchors([note_id]).get(note_id, [])
    theirs = _current_anchors(anchor_rows)
    anchors_differ = ({_anchor_key(a) for _, a in mine} != {_anchor_key(a) for a in theirs})
    # Confirmed, refuted or open again there: a question's answer is news too.
    outcome = row.get("resolution") or None
    resolves = (outcome != current.resolution and current.status in ("active", "refuted")
                and row["status"] in ("active", "refuted"))
    if same and not anchors_differ and row["status"] == current.status and not resolves:
        return "unchanged"
    seq = None
    if not same:  # what changed, as an edit says it, and that an import did it
        names = [name for name, theirs, here in zip(
            ("text", "kind", "priority", "tags"), fields,
            (current.text, current.kind, current.priority, current.tags)) if theirs != here]
        seq = journal.append("edited", note_id, actor=actor, at=now,
                             data={"changed": [*names, "imported"]})
        provenance = Provenance.from_dict(json.loads(latest["provenance"])
                                          if latest.get("provenance") else None)
        store.insert_version(note_id, text=latest["text"], content_hash=latest["content_hash"],
                             kind=latest["kind"], priority=latest["priority"],
                             tags=latest["tags"], author=latest.get("author"),
                             provenance=provenance, at=now, seq=seq)
    if anchors_differ:
        if seq is None:  # the file's fingerprints were taken later: as if verified here
            seq = journal.append("verified", note_id, actor=actor, at=now,
                                     data={"retaken": len(theirs), "imported": True})
        positions = {(a.kind, a.target): position for position, a in mine}
        following = store.next_anchor_position(note_id)
        rows = []
        for anchor in theirs:
            position = positions.pop((anchor.kind, anchor.target), None)
            if position is None:
                position, following = following, following + 1
            rows.append((position, anchor))
        for (kind, target), position in positions.items():  # no longer in the file's note
            origin = next(a.origin for p, a in mine if p == position)
            rows.append((position, Anchor(kind, target, {"dropped": True}, origin)))
        store.insert_anchors(note_id, rows, seq=seq, at=now)
    if resolves:
        reason = row.get("resolution_reason")
        if outcome == "confirmed" and current.status == "refuted":
            journal.append("reopened", note_id, actor=actor, at=now, data={"imported": True})
        journal.append(outcome or "reopened", note_id, actor=actor, at=now,
                       data={"imported": True, **({"reason": reason} if reason else {})})
    elif (row["status"] != current.status and row["status"] in ("active", "revoked")
          and current.status in ("active", "revoked")):
        journal.append("reinstated" if row["status"] == "active" else "revoked", note_id,
                       actor=actor, at=now, data={"imported": True})
    elif same and not anchors_differ:  # a status this cannot set (superseded: merge links it)
        return "unchanged"
    return "replaced"
