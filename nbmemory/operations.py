"""What each store operation is, declared once: read by ``Memory``, the service client and
the owner.

An operation is a method of the same name and signature on ``Memory`` (the facade) and on
the engine (``tests/test_operations.py`` checks both against this table). Standard library
only: kernels import it.
"""

from __future__ import annotations

from dataclasses import dataclass

from .errors import DiskFull, InvalidInput


@dataclass(frozen=True)
class Operation:
    """``read``: changes nothing in the store, so it is safe to send again after the owner
    died while handling it (exports rewrite the same file). Every other operation writes
    and carries a request id, so that a resent one is applied once. ``long``: takes as long
    as the store is big (no request timeout). ``progress``: accepts a ``progress(done,
    total)`` callback. ``quick``: asked for the user without their asking (ambient recall,
    under a cell that ran): waits QUICK_TIMEOUT_S for a stuck owner, not the request timeout."""

    name: str
    read: bool = False
    long: bool = False
    progress: bool = False
    quick: bool = False

    @property
    def writes(self) -> bool:
        return not self.read

    @property
    def words(self) -> str:
        """The operation as a message to a user names it ("retrying a recall")."""
        return WORDS.get(self.name, self.name.replace("_", " "))


QUICK_TIMEOUT_S = 10.0

# What the others are, to someone who never called them by name: the magics read the
# anchored variables, files and notes before a cell's ambient line or a recall.
WORDS = {"recall_terms": "a recall", "variable_anchors": "a look-up of the anchored variables",
         "anchor_targets": "a look-up of the anchored files", "import_jsonl": "an import",
         "notes_about": "a look-up of the notes about a cell", "export_jsonl": "an export",
         "export_markdown": "a Markdown export", "remember_many": "a bulk remember",
         "get": "a read of a note", "notes": "a listing", "stale": "a listing of stale notes",
         "written_by": "a look-up of the note a cell wrote",
         "status": "a status", "history": "a read of a note's history", "edit": "an edit",
         "open_questions": "a listing of open questions",
         "snapshot_diff": "a snapshot diff", "snapshots": "a listing of snapshots",
         "versions": "a read of a note's versions", "chain": "a read of a supersede chain",
         "checks": "a read of the checks", "similar": "a look-up of similar notes"}


def _table(*operations: Operation) -> dict[str, Operation]:
    return {op.name: op for op in operations}


OPERATIONS: dict[str, Operation] = _table(
    # writes
    Operation("remember"),
    Operation("remember_many", long=True, progress=True),
    Operation("supersede"),
    Operation("edit"),
    Operation("forget"),
    Operation("reinstate"),
    Operation("purge"),
    Operation("confirm"),
    Operation("refute"),
    Operation("reopen"),
    Operation("snapshot"),
    Operation("verify"),
    Operation("record_checks"),
    Operation("trust"),
    Operation("reembed", long=True, progress=True),
    Operation("reindex", long=True, progress=True),
    Operation("import_jsonl", long=True, progress=True),
    # reads
    Operation("recall", read=True),
    Operation("recall_terms", read=True),
    Operation("get", read=True),
    Operation("written_by", read=True),
    Operation("notes", read=True),
    Operation("stale", read=True),
    Operation("checks", read=True),
    Operation("similar", read=True),
    Operation("history", read=True),
    Operation("chain", read=True),
    Operation("versions", read=True),
    Operation("open_questions", read=True),
    Operation("snapshots", read=True),
    Operation("snapshot_diff", read=True),
    Operation("variable_anchors", read=True),
    Operation("anchor_targets", read=True),
    Operation("notes_about", read=True, quick=True),
    Operation("status", read=True),
    Operation("export_jsonl", read=True, long=True, progress=True),
    Operation("export_markdown", read=True, long=True),
)


def operation(name: object) -> Operation:
    """The operation called ``name``; a clear error for anything else."""
    op = OPERATIONS.get(name) if isinstance(name, str) else None
    if op is None:
        raise InvalidInput(f"Unknown operation {name!r}; see docs/service-protocol.md")
    return op


def disk_full_error(name: str, directory, reason: str) -> DiskFull:
    """Why the operation ``name`` failed when the disk holding the store ``directory`` is
    full (``reason``: files.disk_full's words), in the user's words."""
    return DiskFull(f"{operation(name).words} failed because the disk holding the store "
                    f"{directory} is full ({reason}). Free some space, then try again; "
                    "nothing that was acknowledged is lost.")
