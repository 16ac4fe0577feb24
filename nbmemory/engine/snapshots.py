"""Snapshots: sealing the current state (a journal position and its stale flags),
listing them, the notes as a snapshot saw them, and what changed between two."""

from __future__ import annotations

import unicodedata

from dataclasses import replace

from ..errors import Command, Conflict, InvalidInput, NotFound
from ..history import diff
from ..models import Note, Snapshot, SnapshotDiff, StaleReason, utcnow
from ..store import Filters
from .part import Part
from .validate import MAX_NAME_CHARS, default_author, unicode_text

MAX_MESSAGE_CHARS = 10_000


class Snapshots(Part):
    def snapshot(self, name: str, *, message: str = "", author: str | None = None,
                 request_id: str | None = None, variables: dict | None = None) -> Snapshot:
        """Seal the current state under ``name``: a journal position plus the stale flags
        (variable anchors judged by the calling kernel's ``variables``, see stale.py).

        A repeated ``request_id`` returns the snapshot it sealed."""
        # Composed, as typed on another keyboard (macOS gives é as e and an accent).
        name = unicodedata.normalize("NFC", unicode_text(name or "", "The snapshot's name").strip())
        if len(name) > MAX_NAME_CHARS:
            raise InvalidInput(f"The snapshot's name has {len(name):,} characters; keep it "
                               f"under {MAX_NAME_CHARS}, and put the story in its message")
        message = unicode_text(message or "", "The snapshot's message")
        if len(message) > MAX_MESSAGE_CHARS:
            raise InvalidInput(f"The snapshot's message has {len(message):,} characters; keep "
                               f"it under {MAX_MESSAGE_CHARS:,} (the findings go in notes)")
        if name.startswith("-"):
            raise InvalidInput("A snapshot's name may not start with a dash: it would read as an "
                               "option wherever it is typed; e.g. {0}",
                               Command("snapshot", ("before-refactor",)))
        if not name or any(c.isspace() or not c.isprintable() or c in "\"'`" for c in name):
            raise InvalidInput("Give the snapshot a name without spaces, quotes or control "
                               "characters, e.g. {0}", Command("snapshot", ("before-refactor",)))
        if name.lower() == "now":
            raise InvalidInput("'now' is what a diff compares with when it is given one "
                               "snapshot; give the snapshot another name, e.g. {0}",
                               Command("snapshot", ("before-refactor",)))
        with self.lock:
            done = self.store.request_event(request_id) if request_id else None
            if done is not None:
                return self.store.snapshots(done.data["name"])[0]
            if self.store.snapshots(name):
                raise Conflict(f"A snapshot named {name!r} already exists; pick another name "
                               "(list them with {0}).", Command("snapshots"))
            at = utcnow()
            author = default_author(author)
            stale = {str(note_id): [r.to_dict() for r in reasons]
                     for note_id, reasons in self.stale_now(variables).items()}
            machine = self.engine.checker.machine
            if machine:  # a team store: these flags are this machine's files' (stale_at)
                stale = {f"@{machine}": stale}
            with self.engine.writing() as entry:
                seq = entry.append("snapshot", None, actor=author, at=at, request_id=request_id,
                                   data={"name": name})
                self.store.add_snapshot(name, seq=seq, at=at, message=message, author=author,
                                        stale=stale)
            return self.store.snapshots(name)[0]

    def snapshots(self) -> list[Snapshot]:
        with self.lock:
            return self.store.snapshots()

    def named(self, name: str) -> Snapshot:
        name = unicode_text(name, "A snapshot's name")
        found = self.store.snapshots(name) or [  # or the same name in another form
            s for s in self.store.snapshots()
            if unicodedata.normalize("NFC", s.name) == unicodedata.normalize("NFC", name.strip())]
        if not found and name.strip().lower() == "now":
            raise InvalidInput("'now' is where a diff ends when it is given one snapshot, not "
                               "where it starts: give the snapshot to compare with first, "
                               "e.g. {0}", Command("snapshot_diff", ("before-refactor",)))
        if not found:
            known = ", ".join(s.name for s in self.store.snapshots()[-5:]) or "none yet"
            raise NotFound(f"No snapshot named {name!r} (recent: {known}). "
                           "List them with {0}.", Command("snapshots"))
        return found[0]

    def stale_now(self, variables: dict | None = None) -> dict[int, list[StaleReason]]:
        """Stale reasons of every active note, as of now."""
        notes = self.store.list_notes(Filters(), limit=2**62)[0]
        return {n.id: list(n.stale) for n in self.engine.staleness.with_stale(notes, variables) if n.stale}

    def as_sealed(self, notes: list[Note], snapshot: Snapshot) -> list[Note]:
        """Notes with the anchors and stale flags they had when ``snapshot`` was sealed."""
        stale = self.stale_at(snapshot) or {}
        anchors = self.store.anchors_at([n.id for n in notes], snapshot.seq)
        return [replace(n, stale=tuple(self.engine.staleness.superseded(n, snapshot.seq) + stale.get(n.id, [])),
                         anchors=tuple(a for _, a in anchors.get(n.id, ()))) for n in notes]

    def stale_at(self, snapshot: Snapshot) -> dict[int, list[StaleReason]] | None:
        """The stale flags sealed with ``snapshot``; None when they were another machine's
        (a team store's member seals what their own files said)."""
        sealed = self.store.snapshot_stale(snapshot.name)
        if any(key.startswith("@") for key in sealed):
            sealed = sealed.get(f"@{self.engine.checker.machine}")
            if sealed is None:
                return None
        return {int(i): [StaleReason.from_dict(r) for r in reasons]
                for i, reasons in sealed.items()}

    def snapshot_diff(self, a: str, b: str | None = None, *,
                      variables: dict | None = None) -> SnapshotDiff:
        """Notes added, edited, superseded, revoked, reinstated, purged or gone stale from
        snapshot ``a`` to snapshot ``b`` (default: now, judged with ``variables``)."""
        with self.lock:
            first = self.named(a)
            before = {n.id: n for n, _ in self.store.notes_at(first.seq)}
            if b is None or b.strip().lower() == "now":  # no snapshot may be named now
                b_name, b_seq = "now", self.store.position()
                stale_after = self.stale_now(variables)
            else:
                second = self.named(b)
                b_name, b_seq = second.name, second.seq
                if b_seq < first.seq:
                    raise InvalidInput(f"Snapshot {a!r} was sealed after {b!r}; a diff goes "
                                       f"from the earlier to the later: give {b!r} first.")
                stale_after = self.stale_at(second)
            after = {n.id: n for n, _ in self.store.notes_at(b_seq)}
            stale_before = self.stale_at(first)
            if stale_before is None or stale_after is None:  # sealed by another machine:
                stale_before = stale_after = {}  # its files, not comparable with these
            after = {i: replace(n, stale=tuple(stale_after.get(i, ()))) for i, n in after.items()}
            compared = stale_after
            if b_name == "now":  # a variable not judged here is as it was, not "no longer stale"
                anchors = self.store.anchors(list(stale_before))
                compared = {i: stale_after.get(i, []) + [
                    r for r in stale_before.get(i, []) if r.target in self.engine.checker.unjudged(
                        (a for _, a in anchors.get(i, ())), variables)]
                    for i in set(stale_before) | set(stale_after)}
            changes = diff(before, after, stale_before, compared)
            # What each changed note is about (its anchors as they are now), as recall shows.
            about = self.store.anchors([c.note.id for c in changes])
            changes = [replace(c, note=replace(c.note, anchors=tuple(a for _, a in about[c.note.id])))
                       if about.get(c.note.id) else c for c in changes]
            return SnapshotDiff(first.name, b_name, first.seq, b_seq, tuple(changes))

