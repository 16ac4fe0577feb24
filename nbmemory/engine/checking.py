"""Checks that notes carry: which exist, what they last gave, who trusts them.

The engine never evaluates a check: kernels do (nbmemory.checks) and send the outcomes,
which are journalled here as ``check_passed``, ``check_failed``, ``check_error`` or
``check_skipped``. The latest failure of a check is a stale reason of its note, and so is
an error where someone ran the check (``%memory check``, the panel's Re-check): a check that
can no longer run (its column is gone) does not hold either. Not an error of the ambient
re-check (``auto``: a Run All passes through states where a column is not made yet), nor a
check stopped at its time budget (that depends on the machine). A skip (the names are not
in that kernel) changes nothing.
"""

from __future__ import annotations

import hashlib
import json
import time
from pathlib import Path
from typing import Any, Sequence

from ..errors import Conflict, InvalidInput, ReadOnlyStore, StoreUnavailable
from ..files import atomic_write
from ..models import Note, StaleReason, utcnow
from .part import Part
from .validate import default_author, note_id as valid_id, unicode_text

OUTCOMES = ("passed", "failed", "error", "skipped")
# A team store's trusts, kept on this machine and nowhere else: every member may write the
# store's rows, so a trust there (or a check's row under one) could be anyone's. By user,
# note uid (a store dropped and made again has other notes under the same ids) and a hash of
# each check trusted (the text of a check purged since stays out).
TRUST_FILENAME = "trusted.json"


class Checking(Part):
    def checks(self, *, actor: str | None = None) -> list[dict[str, Any]]:
        """Every check of an active note: ``note``, ``expression``, ``names``, ``value``
        and ``variables`` (their fingerprints) when it was written, ``trusted`` (``actor``
        trusted the check as it reads), ``trusted_before`` (``actor`` trusted a check of the
        note: this one as it read then), ``imported`` (an import brought or changed the note)
        and ``last`` (the latest outcome, or None)."""
        actor = default_author(actor)
        with self.lock:
            local = (_local_trusts(self.engine.directory).get(actor, {})
                     if self.engine.shared else None)
            anchored = self.store.anchors(self.store.anchored_note_ids())
            ids = [i for i, rows in anchored.items() if any(a.kind == "check" for _, a in rows)]
            uids = self.store.uids_of(ids) if self.engine.shared else {}  # of those with checks
            notes = {n.id: n for n in self.engine.staleness.with_stale(
                list(self.store.get_notes(ids).values()))}
            events = self.store.check_events(ids)
            out = []
            for note_id in sorted(notes, reverse=True):
                note, imported = notes[note_id], any(map(_imported, events.get(note_id, ())))
                for _, anchor in anchored[note_id]:
                    if anchor.kind != "check":
                        continue
                    last = _latest(events.get(note_id, ()), anchor.target)
                    mine = (local.get(uids.get(note.id), ()) if local is not None else
                            [e for e in events.get(note_id, ()) if e.type == "trusted"
                             and e.actor == actor])
                    out.append({"note": note, "expression": anchor.target,
                                "names": anchor.fingerprint.get("names", []),
                                "value": anchor.fingerprint.get("value", ""),
                                "variables": anchor.fingerprint.get("variables", {}),
                                "trusted": _digest(anchor.target) in local.get(uids.get(note.id), ())
                                if local is not None else
                                _trusted(events.get(note_id, ()), actor, anchor.target),
                                "trusted_before": bool(mine),
                                "imported": imported,
                                "last": last})
            return out

    def record_checks(self, outcomes: Sequence[dict[str, Any]], *, actor: str | None = None,
                      request_id: str | None = None) -> list[Note]:
        """Journal what a kernel's re-check of each note gave: dicts of ``note_id``,
        ``expression``, ``status`` (passed, failed, error, skipped) and ``value``,
        ``error`` or ``why``."""
        if not isinstance(outcomes, (list, tuple)):
            raise InvalidInput("record_checks takes a list of outcomes")
        clean = [_outcome(o) for o in outcomes]
        with self.lock:
            if request_id and self.store.request_note(request_id) is not None:
                return list(self.store.get_notes([o["note_id"] for o in clean]).values())
            for o in clean:
                self.engine.writes.require_status(o["note_id"], "active", "check")
            at, actor = utcnow(), default_author(actor)
            with self.engine.writing() as entry:
                for o in clean:
                    data = {k: v for k, v in o.items() if k not in ("note_id", "status") and v}
                    entry.append(f"check_{o['status']}", o["note_id"], actor=actor, at=at,
                                 request_id=request_id, data=data)
            notes = self.store.get_notes([o["note_id"] for o in clean])
            return self.engine.staleness.with_stale(list(notes.values()))

    def trust(self, note_id: int, *, checks: Sequence[str] | None = None,
              actor: str | None = None, request_id: str | None = None) -> Note:
        """Let ``actor``'s kernels run the checks of a note someone else wrote: ``checks``,
        the expressions they read (refused if the note's are no longer those), else all."""
        note_id = valid_id(note_id)
        if checks is not None:
            checks = [checks] if isinstance(checks, str) else list(checks)
            if not checks or not all(isinstance(c, str) for c in checks):
                raise InvalidInput("checks lists the check expressions read (None: all of the "
                                   f"note's), not {checks!r}.")
        with self.lock:
            note = self.engine.writes.require_status(note_id, "active", "trust")
            current = [a.target for a in self.engine.reads.get(note_id).anchors
                       if a.kind == "check"]
            if not current:
                raise InvalidInput(f"Note #{note_id} has no check to trust.")
            actor, sent_again = default_author(actor), bool(
                request_id and self.store.request_note(request_id) is not None)
            checks = checks if checks is not None else current
            changed = [c for c in checks if c not in current]
            if changed and not sent_again:  # sent again: what the first one trusted stands
                raise Conflict(f"Note #{note_id} has no check {changed[0]!r} any more: it changed "
                               f"since it was read. Read it again (%memory history {note_id}), "
                               "then trust it. Nothing was trusted.")
            here = _local_trusts(self.engine.directory, writing=True) if self.engine.shared else {}
            try:
                if not sent_again:
                    with self.engine.writing() as entry:  # the checks as read, not later ones
                        entry.append("trusted", note.id, actor=actor, at=utcnow(),
                                     request_id=request_id, data={"checks": checks})
            except ReadOnlyStore:  # a reader's trust is kept here alone, as every trust is
                if not self.engine.shared:
                    raise
            if self.engine.shared and not changed:  # the journal's event is for the history
                _trust_here(self.engine.directory, here, actor,
                            self.store.uids_of([note.id])[note.id], checks)
            return self.engine.reads.get(note_id)

    def failed(self, notes: Sequence[Note]) -> dict[int, list[StaleReason]]:
        """``check_failed`` and ``check_error`` reasons of the notes whose latest check
        outcome was a failure or an error."""
        ids = [n.id for n in notes if any(a.kind == "check" for a in n.anchors)]
        if not ids:
            return {}
        events = self.store.check_events(ids)
        out: dict[int, list[StaleReason]] = {}
        for note in notes:
            for anchor in note.anchors:
                last = anchor.kind == "check" and _latest(events.get(note.id, ()), anchor.target,
                                                          skips=False)
                if last and last["status"] == "failed":
                    out.setdefault(note.id, []).append(StaleReason(
                        "check_failed", anchor.target,
                        f"is now False, value {last.get('value', '?')}"))
                elif last and last["status"] == "error":
                    error = last.get("error", "?")
                    out.setdefault(note.id, []).append(StaleReason(
                        "check_error", anchor.target,
                        error if error.startswith("ran past") else f"raised {error}"))
        return out


def _imported(event) -> bool:
    data = event.data or {}
    return bool(data.get("imported") or data.get("imported_from")
                or "imported" in data.get("changed", ()))


def _trusted(events, actor: str, expression: str) -> bool:
    """Whether ``actor`` may run a note's check ``expression`` in a store of their own: they
    trusted it, as it reads (or, before trusts named their checks, at all), in this store
    (the kernel that writes a check trusts it at once) since an import last changed the
    note. An export cannot carry trust: imports mark ``trusted`` events."""
    trusted: set[str] | bool = set()  # the checks trusted since the last import (True: all)
    for event in events:
        if _imported(event):
            trusted = set()
        elif event.type == "trusted" and event.actor == actor and trusted is not True:
            checks = (event.data or {}).get("checks")
            trusted = trusted | set(checks) if isinstance(checks, list) else True
    return trusted is True or expression in trusted


def _digest(expression: str) -> str:
    return hashlib.sha256(expression.encode("utf-8", "surrogatepass")).hexdigest()


def _local_trusts(directory: Path, *, writing: bool = False) -> dict[str, dict[str, list[str]]]:
    """This machine's trusts; a file that is not as written is moved aside (trusting
    nothing until it is looked at), never read half or written over. One that cannot be
    read now trusts nothing, and refuses a trust ``writing`` it would lose the rest."""
    path = Path(directory) / TRUST_FILENAME
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except OSError as error:
        if writing:
            raise StoreUnavailable(
                f"Cannot read {path} ({error.strerror or error}), where this machine keeps "
                "your trusts: writing it now would lose them. Nothing was trusted; make it "
                "readable, then trust again.") from error
        return {}
    except ValueError:
        data = None
    if isinstance(data, dict) and all(
            isinstance(by_note, dict) and all(isinstance(d, list) and all(
                isinstance(x, str) for x in d) for d in by_note.values())
            for by_note in data.values()):
        return data
    path.replace(path.with_name(f"{TRUST_FILENAME}.damaged-{time.time():.0f}"))
    return {}


def _trust_here(directory: Path, trusts: dict, actor: str, uid: str, checks: list[str]) -> None:
    mine = trusts.setdefault(actor, {})
    mine[uid] = sorted(set(mine.get(uid, [])) | {_digest(c) for c in checks})
    atomic_write(Path(directory) / TRUST_FILENAME,
                 lambda tmp: tmp.write_text(json.dumps(trusts, indent=1), encoding="utf-8"))


def _latest(events, expression: str, *, skips: bool = True) -> dict[str, Any] | None:
    """The latest outcome of a check (``skips=False``: the latest that said whether it
    holds: no skip, no error of the ambient re-check, no time budget run out)."""
    for event in reversed(list(events)):
        if not skips and (event.type == "check_skipped" or event.type == "check_error" and (
                event.data.get("auto") or event.data.get("error", "").startswith("ran past"))):
            continue
        if event.type.startswith("check_") and event.data.get("expression") == expression:
            return {"status": event.type[len("check_"):], "at": event.at.isoformat(),
                    "by": event.actor, **{k: v for k, v in event.data.items()
                                          if k != "expression"}}
    return None


def _outcome(raw: Any) -> dict[str, Any]:
    if not isinstance(raw, dict):
        raise InvalidInput(f"A check outcome is a dict, not {type(raw).__name__}")
    status = raw.get("status")
    if status not in OUTCOMES:
        raise InvalidInput(f"A check's outcome is one of {', '.join(OUTCOMES)}, not {status!r}")
    out = {"note_id": valid_id(raw.get("note_id")), "status": status,
           "expression": unicode_text(raw.get("expression") or "", "A check's expression")}
    for key in ("value", "error", "why"):
        value = raw.get(key) or ""
        out[key] = unicode_text(value, f"A check's {key}")[:500]
    out["auto"] = raw.get("auto") is True  # the ambient re-check's, not someone's run
    return out
