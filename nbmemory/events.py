"""What each journal event does to a note's status and resolution: written once, here.

The engine's journal applies an event's :class:`Effect` to the store's current state in
the transaction that appends it (imports too); the store folds the same table in SQL to
show the notes as they were at a past position (:func:`status_sql`). Other events
(``edited``, ``verified``, ``snapshot``...) add rows (versions, fingerprints, snapshots)
and change no status.
"""

from __future__ import annotations

from dataclasses import dataclass

KEEP = "keep"  # an effect's resolution when the event leaves it as it was


@dataclass(frozen=True)
class Effect:
    status: str | None = None  # the note's status after the event; None: unchanged
    resolution: str | None = KEEP  # "confirmed", "refuted", None (cleared) or KEEP


EFFECTS: dict[str, Effect] = {
    "created": Effect(status="active"),
    "revoked": Effect(status="revoked"),
    "reinstated": Effect(status="active"),
    "superseded_by": Effect(status="superseded"),
    "purged": Effect(status="purged"),
    "confirmed": Effect(resolution="confirmed"),
    "refuted": Effect(status="refuted", resolution="refuted"),
    "reopened": Effect(status="active", resolution=None),
}

# Kept in the indexes but recalled only as "previously believed".
INACTIVE = frozenset({"revoked", "superseded", "refuted"})
# Every status a note in the indexes can have.
INDEXED = ("active", *sorted(INACTIVE))


def _quoted(values) -> str:
    return ", ".join(f"'{v}'" for v in values)


def status_sql(last_type: str) -> tuple[str, str, str]:
    """SQL for a past state: (the event types that set a status, a CASE giving the status
    after ``last_type``, the types after which a note is active)."""
    setting = [t for t, e in EFFECTS.items() if e.status]
    cases = " ".join(f"WHEN '{t}' THEN '{e.status}'" for t, e in EFFECTS.items() if e.status)
    active = [t for t, e in EFFECTS.items() if e.status == "active"]
    return _quoted(setting), f"CASE {last_type} {cases} END", _quoted(active)
