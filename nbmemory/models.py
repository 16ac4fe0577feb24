"""Domain objects: small frozen dataclasses shared by every layer.

Each has ``to_dict``/``from_dict`` so the service, the REST API and the MCP server
can move them as JSON without knowing their insides.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

KINDS = ("finding", "gotcha", "decision", "question", "reference", "procedure")
PRIORITIES = ("high", "medium", "low")
STATUSES = ("active", "revoked", "superseded", "refuted", "purged")
RESOLUTIONS = ("confirmed", "refuted")
# How recall ranks: both channels fused, or one of them alone.
MODES = ("hybrid", "lexical", "dense")
MODE_HELP = ("hybrid (default): by meaning and by keyword; lexical: keywords only (exact "
             "words, identifiers, any language); dense: meaning only")
STALE_REASONS = (
    "missing",
    "content_changed",
    "schema_changed",
    "rows_changed",
    "cell_changed",
    "superseded",
    "check_failed",  # its check's latest outcome (engine/checking.py)
    "check_error",
    "unchecked",  # a team store's repository is not checked out on this machine
)


def utcnow() -> datetime:
    return datetime.now(timezone.utc)


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value is not None else None


def _dt(value: str | datetime | None) -> datetime | None:
    if value is None or isinstance(value, datetime):
        return value
    return datetime.fromisoformat(value)


@dataclass(frozen=True)
class Provenance:
    """Where a note came from. Every field is optional: a CLI note has no cell.

    ``notebook`` is an absolute path; ``cell_hash`` hashes ``cell_source`` before it is
    cut to :data:`~nbmemory.provenance.MAX_SOURCE` characters; ``captured_at`` is ISO time.
    """

    notebook: str | None = None
    cell_id: str | None = None
    execution_count: int | None = None
    cell_hash: str | None = None
    cell_source: str | None = None
    kernel_session: str | None = None
    git_commit: str | None = None
    git_branch: str | None = None
    git_dirty: bool | None = None
    workspace: str | None = None
    source: str | None = None  # "notebook", "ipython", "cli", "mcp", "api", "panel"
    cwd: str | None = None
    author: str | None = None
    captured_at: str | None = None

    def to_dict(self) -> dict[str, Any]:
        # Every field is a plain value: no need for asdict's deep copy (a bulk remember
        # spent a fifth of its time there).
        return {f.name: v for f in dataclasses.fields(self)
                if (v := getattr(self, f.name)) is not None}

    @classmethod
    def from_dict(cls, data: dict[str, Any] | None) -> Provenance:
        return cls(**{k: v for k, v in (data or {}).items() if k in _PROVENANCE_FIELDS})


_PROVENANCE_FIELDS = frozenset(f.name for f in dataclasses.fields(Provenance))


@dataclass(frozen=True)
class Anchor:
    """Something a note is about, with the fingerprint taken when it was last checked.

    ``origin`` says how it came: ``text`` (a path the note mentions), ``about`` (named
    with ``--about``) or ``cell`` (the cell the note was written in).
    """

    kind: str  # file, dir, glob, data, variable, cell
    target: str
    fingerprint: dict[str, Any] = field(default_factory=dict)
    origin: str = "about"

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "target": self.target, "fingerprint": self.fingerprint,
                "origin": self.origin}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Anchor:
        return cls(data["kind"], data["target"], dict(data.get("fingerprint") or {}),
                   data.get("origin", "about"))


@dataclass(frozen=True)
class StaleReason:
    """Why a note may no longer hold: ``content_changed data/orders.csv``."""

    reason: str
    target: str = ""
    detail: str = ""

    def __str__(self) -> str:
        text = f"{self.reason} {self.target}".strip()
        return f"{text} ({self.detail})" if self.detail else text

    def to_dict(self) -> dict[str, Any]:
        return {"reason": self.reason, "target": self.target, "detail": self.detail}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> StaleReason:
        return cls(data["reason"], data.get("target", ""), data.get("detail", ""))


@dataclass(frozen=True)
class Note:
    id: int
    text: str
    kind: str = "finding"
    priority: str = "medium"
    tags: tuple[str, ...] = ()
    status: str = "active"
    version: int = 1
    created_at: datetime | None = None
    updated_at: datetime | None = None
    author: str | None = None
    provenance: Provenance = field(default_factory=Provenance)
    anchors: tuple[Anchor, ...] = ()
    stale: tuple[StaleReason, ...] = ()
    supersedes: int | None = None
    resolution: str | None = None  # confirmed | refuted (questions and hypotheses)
    resolution_reason: str | None = None
    behind: str | None = None  # read from this machine's copy of an unreachable team store

    @property
    def is_stale(self) -> bool:
        return bool(self.stale)

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "text": self.text,
            "kind": self.kind,
            "priority": self.priority,
            "tags": list(self.tags),
            "status": self.status,
            "version": self.version,
            "created_at": _iso(self.created_at),
            "updated_at": _iso(self.updated_at),
            "author": self.author,
            "provenance": self.provenance.to_dict(),
            "anchors": [a.to_dict() for a in self.anchors],
            "stale": [s.to_dict() for s in self.stale],
            "supersedes": self.supersedes,
            "resolution": self.resolution,
            "resolution_reason": self.resolution_reason,
            **({"behind": self.behind} if self.behind else {}),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Note:
        return cls(
            id=int(data["id"]),
            text=data["text"],
            kind=data.get("kind", "finding"),
            priority=data.get("priority", "medium"),
            tags=tuple(data.get("tags") or ()),
            status=data.get("status", "active"),
            version=int(data.get("version", 1)),
            created_at=_dt(data.get("created_at")),
            updated_at=_dt(data.get("updated_at")),
            author=data.get("author"),
            provenance=Provenance.from_dict(data.get("provenance")),
            anchors=tuple(Anchor.from_dict(a) for a in data.get("anchors") or ()),
            stale=tuple(StaleReason.from_dict(s) for s in data.get("stale") or ()),
            supersedes=data.get("supersedes"),
            resolution=data.get("resolution"),
            resolution_reason=data.get("resolution_reason"),
            behind=data.get("behind"),
        )


@dataclass(frozen=True)
class Hit:
    """A recalled note with its fused score and, for explain mode, per-channel scores."""

    note: Note
    score: float
    lexical: float | None = None
    dense: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"note": self.note.to_dict(), "score": self.score,
                "lexical": self.lexical, "dense": self.dense}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Hit:
        return cls(Note.from_dict(data["note"]), float(data["score"]),
                   data.get("lexical"), data.get("dense"))


class Hits(list):
    """The result of a recall: a list of :class:`Hit` plus what the user should know about it.

    ``filtered_out`` counts candidates a score threshold hid; ``previously`` holds revoked
    notes that would have matched ("previously believed ..."); ``behind`` says why the
    answer may miss recent notes (a team store's server was unreachable); ``as_of``, the
    snapshot whose notes were searched. ``fusion``
    (explain mode, hybrid): how the scores were made: the keyword ``weight``, the share of
    the query its best keyword match ``covered``, the shares keywords count ``from`` and
    are ``full`` at, their ``most`` weight, the ``priority`` bonus (+ high, - low), and how
    many notes closest in meaning kept their places ``below`` which keywords lifted the
    others (0 unless the query's best keyword match covered less than ``from``).
    """

    def __init__(self, hits=(), *, query: str = "", filtered_out: int = 0,
                 previously: tuple[Hit, ...] = (), explain: bool = False,
                 behind: str | None = None, fusion: dict[str, float] | None = None,
                 as_of: str | None = None):
        super().__init__(hits)
        self.query = query
        self.filtered_out = filtered_out
        self.previously = tuple(previously)
        self.explain = explain
        self.behind = behind
        self.fusion = fusion
        self.as_of = as_of

    @property
    def notes(self) -> list[Note]:
        return [h.note for h in self]

    @property
    def headers(self) -> list[str]:
        """What to say before the hits: the snapshot searched, why some may be missing."""
        return ([f"As of snapshot {self.as_of!r}:"] if self.as_of else []) + (
            [f"({self.behind})"] if self.behind else [])

    def to_dict(self) -> dict[str, Any]:
        return {
            "query": self.query,
            "hits": [h.to_dict() for h in self],
            "filtered_out": self.filtered_out,
            "previously": [h.to_dict() for h in self.previously],
            "explain": self.explain,
            "behind": self.behind,
            "fusion": self.fusion,
            "as_of": self.as_of,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Hits:
        return cls(
            [Hit.from_dict(h) for h in data["hits"]],
            query=data.get("query", ""),
            filtered_out=int(data.get("filtered_out", 0)),
            previously=tuple(Hit.from_dict(h) for h in data.get("previously") or ()),
            explain=bool(data.get("explain")),
            behind=data.get("behind"),
            fusion=data.get("fusion"),
            as_of=data.get("as_of"),
        )

    def to_dataframe(self):
        """The hits as a pandas DataFrame, one row per note (pandas is imported here); the
        channels' scores (``lexical``, ``dense``) only when recalled with ``explain``."""
        import pandas as pd

        scores = ("lexical", "dense") if self.explain else ()
        return pd.DataFrame([{"id": h.note.id, "score": h.score,
                              **{name: getattr(h, name) for name in scores},
                              **_note_row(h.note, HIT_COLUMNS)} for h in self],
                            columns=["id", "score", *scores, *HIT_COLUMNS])


@dataclass(frozen=True)
class Snapshot:
    name: str
    seq: int
    at: datetime
    message: str = ""
    author: str | None = None
    note_count: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "seq": self.seq, "at": _iso(self.at),
                "message": self.message, "author": self.author, "note_count": self.note_count}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Snapshot:
        return cls(data["name"], int(data["seq"]), _dt(data["at"]), data.get("message", ""),
                   data.get("author"), int(data.get("note_count", 0)))


@dataclass(frozen=True)
class Event:
    """One entry of the append-only journal."""

    seq: int
    at: datetime
    note_id: int | None
    type: str
    actor: str | None = None
    data: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"seq": self.seq, "at": _iso(self.at), "note_id": self.note_id,
                "type": self.type, "actor": self.actor, "data": self.data}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Event:
        return cls(int(data["seq"]), _dt(data["at"]), data.get("note_id"), data["type"],
                   data.get("actor"), dict(data.get("data") or {}))


CHANGES = ("added", "edited", "superseded", "revoked", "refuted", "reinstated", "purged",
           "became_stale", "stale_anew", "no_longer_stale")


@dataclass(frozen=True)
class Change:
    """One note's change between two moments: ``superseded`` with detail ``by #13``."""

    change: str
    note: Note
    detail: str = ""
    reasons: tuple[StaleReason, ...] = ()  # became_stale, stale_anew: the new reasons, as data

    def to_dict(self) -> dict[str, Any]:
        return {"change": self.change, "note": self.note.to_dict(), "detail": self.detail,
                "reasons": [r.to_dict() for r in self.reasons]}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Change:
        return cls(data["change"], Note.from_dict(data["note"]), data.get("detail", ""),
                   tuple(StaleReason.from_dict(r) for r in data.get("reasons") or ()))


@dataclass(frozen=True)
class SnapshotDiff:
    """What changed in the notes between snapshot ``a`` and snapshot ``b`` (or now)."""

    a: str
    b: str
    a_seq: int
    b_seq: int
    changes: tuple[Change, ...] = ()

    def of(self, change: str) -> list[Note]:
        return [c.note for c in self.changes if c.change == change]

    def to_dict(self) -> dict[str, Any]:
        return {"a": self.a, "b": self.b, "a_seq": self.a_seq, "b_seq": self.b_seq,
                "changes": [c.to_dict() for c in self.changes]}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SnapshotDiff:
        return cls(data["a"], data["b"], int(data["a_seq"]), int(data["b_seq"]),
                   tuple(Change.from_dict(c) for c in data.get("changes") or ()))


@dataclass(frozen=True)
class Page:
    """One page of a listing, with the total the filters matched; ``behind`` says why it may
    miss recent notes (a team store's server was away), as :class:`Hits` does."""

    notes: list[Note]
    total: int
    offset: int
    limit: int
    behind: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"notes": [n.to_dict() for n in self.notes], "total": self.total,
                "offset": self.offset, "limit": self.limit, "behind": self.behind}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Page:
        return cls([Note.from_dict(n) for n in data["notes"]], data["total"],
                   data["offset"], data["limit"], data.get("behind"))

    def to_dataframe(self):
        """This page's notes as a pandas DataFrame, one row per note (pandas is imported
        here); ``total`` says how many the filters matched beyond this page."""
        import pandas as pd

        return pd.DataFrame([_note_row(n, NOTE_COLUMNS) for n in self.notes],
                            columns=list(NOTE_COLUMNS))


NOTE_COLUMNS = ("id", "text", "kind", "priority", "tags", "status", "version", "created_at",
                "updated_at", "author", "stale", "notebook")
HIT_COLUMNS = ("text", "kind", "priority", "tags", "created_at", "stale", "notebook")


def _note_row(note: Note, columns) -> dict[str, Any]:
    row = {"id": note.id, "text": note.text, "kind": note.kind, "priority": note.priority,
           "tags": list(note.tags), "status": note.status, "version": note.version,
           "created_at": note.created_at, "updated_at": note.updated_at, "author": note.author,
           "stale": "; ".join(str(r) for r in note.stale), "notebook": note.provenance.notebook}
    return {c: row[c] for c in columns}
