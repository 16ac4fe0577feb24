"""Writing notes: remember (one, a batch, many), supersede, edit, forget, reinstate and
purge. Every write goes through the journal (questions are resolved in questions.py)."""

from __future__ import annotations

import unicodedata
import uuid
from dataclasses import dataclass
from typing import Any, Iterable, Sequence

from ..anchors import own_anchor
from ..errors import Command, Conflict, InvalidInput, NbMemoryError, NotFound, StoreUnavailable
from ..models import Note, Provenance, utcnow
from .bulk import prepare_many
from .part import Part, Progress
from .validate import (check_kind, check_priority, check_text, content_hash, default_author,
                       each_once, no_note, normalise_tags, note_id as valid_id, unicode_text)

# remember_many's batch: at the model's full speed, and the engine lock is free between them.
BULK_CHUNK = 256
# Meta: a purge is committed and the files that may hold its text are not yet rewritten.
PURGE_UNFINISHED = "purge_unfinished"


@dataclass
class _Batch:
    """What became of each request of a remember batch, by its index."""

    written: dict[int, Note]  # new notes, as written
    earlier: dict[int, int]  # a resent request: the note it wrote before
    same_as: dict[int, int]  # a request id repeated in the batch: the first one's index
    failed: dict[int, NbMemoryError]


class Writes(Part):
    def remember(self, text: str, *, kind: str = "finding", priority: str = "medium",
                 tags: str | Iterable[str] | None = None, author: str | None = None,
                 provenance: Provenance | dict | None = None, request_id: str | None = None,
                 supersedes: int | None = None, about: Sequence[Any] | None = None) -> Note:
        """Store a finding and return it. A repeated ``request_id`` returns the first note.

        ``about``: paths, directories or globs to anchor the note to (fingerprinted here,
        where staleness is checked), and ready variable anchors (fingerprinted in the
        kernel, which has the variables). Paths the text mentions are anchored too."""
        result = self.remember_batch([dict(
            text=text, kind=kind, priority=priority, tags=tags, author=author, about=about,
            provenance=provenance, request_id=request_id, supersedes=supersedes)])[0]
        if isinstance(result, BaseException):
            raise result
        return result

    def remember_batch(self, requests: Sequence[dict[str, Any]]) -> list[Note | NbMemoryError]:
        """Remember several findings with one embedding call and one transaction.

        Each request holds :meth:`remember`'s keyword arguments. The result has one entry
        per request, in order: its note, or the error that request alone met (the others
        are still written). A repeated ``request_id`` gives the note it first wrote. The
        owner service batches concurrent remembers through here.
        """
        prepared: list[tuple[int, dict[str, Any]]] = []
        failed: dict[int, NbMemoryError] = {}
        for i, request in enumerate(requests):
            try:
                prepared.append((i, self.prepare(**request)))
            except NbMemoryError as exc:
                failed[i] = exc
            except TypeError as exc:
                failed[i] = InvalidInput(f"Bad remember request: {exc}")
        # A refused request may be the retry of one that was written before (a file it is
        # about has gone since): the first answer stands.
        retried = {i: requests[i]["request_id"] for i in failed if requests[i].get("request_id")}
        if not prepared and not retried:
            return [failed[i] for i in range(len(requests))]
        with self.lock:
            return self._remember_locked(prepared, retried, failed, len(requests))

    def remember_many(self, notes: Sequence[dict[str, Any]], *, request_id: str | None = None,
                      progress: Progress | None = None) -> list[Note]:
        """Remember many findings at the model's speed: for scripts and bulk loads.

        ``notes`` holds one dict of :meth:`remember`'s keyword arguments per note. Every
        note is checked before any is written: one bad note raises :class:`InvalidInput`
        naming it, and nothing is stored. They are then embedded and written in chunks of
        ``BULK_CHUNK`` (one embedding call, made before the engine's lock is taken, and one
        transaction each: other calls run meanwhile), reporting ``progress(done, total)``. Note ``i`` gets the request id
        ``{request_id}/{i}`` unless it has its own, so a resent call writes each note once.
        """
        prepared = prepare_many(self, notes, request_id)
        results: list[Note] = []
        total = len(prepared)
        for start in range(0, total, BULK_CHUNK):
            chunk = prepared[start:start + BULK_CHUNK]
            closed = StoreUnavailable(f"The store was closed during a bulk remember: "
                                      f"{len(results)} of {total} notes were remembered.")
            ahead = self._embed_ahead([p for _, p in chunk], closed)
            with self.lock:
                if not self.engine.is_open:  # closed while the chunk was embedded
                    raise closed
                answers = self._remember_locked([(i - start, p) for i, p in chunk], {}, {},
                                                len(chunk), ahead)
            failed = [(start + i, a) for i, a in enumerate(answers)
                      if isinstance(a, NbMemoryError)]
            results += [a for a in answers if not isinstance(a, NbMemoryError)]
            if failed:  # the store changed since the checks (another client's write)
                (i, error), others = failed[0], len(failed) - 1
                again = (f"; sent again with request_id={request_id!r}, the call writes only "
                         f"the rest" if request_id else "")
                raise type(error)(f"note {i}: {error} ({len(results)} of {total} notes were "
                                  f"remembered, this one{f' and {others} more' if others else ''}"
                                  f" not{again})")
            if progress:
                progress(min(start + BULK_CHUNK, total), total)
        return results

    def _embed_ahead(self, chunk: list[dict[str, Any]], closed: Exception) -> dict[str, Any]:
        """Vectors of the texts of a chunk's notes not written yet (a resent call's are),
        made before its write takes the engine's lock: embedded inside it, a bulk write held
        it nearly all along, and a recall or a status from another kernel or the panel
        waited for most of the run. None while the model loads (the notes are then taken
        now and embedded later)."""
        with self.lock:
            if not self.engine.is_open:
                raise closed
            done = self.store.request_notes([p["request_id"] for p in chunk if p["request_id"]])
            texts = list(dict.fromkeys(p["text"] for p in chunk if p["request_id"] not in done))
            if not texts or self.engine.model_loading:
                return {}
            self.engine.check_embedder()
        return dict(zip(texts, self.engine.embedder.encode(texts)))

    def prepare(self, text: str, *, kind: str = "finding", priority: str = "medium",
                tags: str | Iterable[str] | None = None, author: str | None = None,
                provenance: Provenance | dict | None = None, request_id: str | None = None,
                supersedes: int | None = None,
                about: Sequence[Any] | None = None) -> dict[str, Any]:
        """Validate one remember request and fingerprint its anchors (no engine lock:
        hashing a big file must not block other calls)."""
        text = check_text(text)
        kind, priority, tags = check_kind(kind), check_priority(priority), normalise_tags(tags)
        if isinstance(provenance, dict):
            provenance = Provenance.from_dict(provenance)
        provenance = provenance or Provenance()
        for name, value in provenance.to_dict().items():  # kept as JSON: valid Unicode only
            if isinstance(value, str):
                unicode_text(value, f"Provenance field {name!r}")
        return dict(text=text, kind=kind, priority=priority, tags=tags,
                    author=default_author(author), provenance=provenance,
                    request_id=request_id or None,
                    supersedes=valid_id(supersedes) if supersedes is not None else None,
                    content_hash=content_hash(text), uid=uuid.uuid4().hex,
                    anchors=self.engine.checker.build(text, about, provenance))

    def _remember_locked(self, prepared: list[tuple[int, dict[str, Any]]],
                         retried: dict[int, str], failed: dict[int, NbMemoryError],
                         count: int, ahead: dict | None = None) -> list[Note | NbMemoryError]:
        """Sort the requests (resent, repeated, refused, new), write the new ones (with the
        vectors made ``ahead``), and answer each in order (engine lock held)."""
        batch = _Batch({}, {}, {}, dict(failed))
        done = self.store.request_notes(
            [p["request_id"] for _, p in prepared if p["request_id"]] + list(retried.values()))
        batch.earlier.update({i: done[rid] for i, rid in retried.items() if rid in done})
        for i in batch.earlier:
            batch.failed.pop(i)
        fresh: list[tuple[int, dict[str, Any]]] = []
        first: dict[str, int] = {}
        replaced: set[int] = set()
        for i, p in prepared:
            rid, old = p["request_id"], p["supersedes"]
            if rid and rid in done:
                batch.earlier[i] = done[rid]
            elif rid and rid in first:
                batch.same_as[i] = first[rid]
            elif old is not None and (problem := self.cannot_supersede(old, replaced)):
                batch.failed[i] = problem
            else:
                if old is not None:
                    replaced.add(old)
                if rid:
                    first[rid] = i
                fresh.append((i, p))
        if fresh:
            try:
                batch.written = self._write_new(fresh, ahead or {})
            except NbMemoryError as exc:
                batch.failed.update({i: exc for i, _ in fresh})
        # Notes written before (resent requests) are read back; new ones are as written.
        notes = list(self.store.get_notes(list(batch.earlier.values())).values())
        notes = {n.id: n for n in self.engine.staleness.with_stale(
            notes + list(batch.written.values()))}
        answers: list[Note | NbMemoryError] = []
        for i in range(count):
            i = batch.same_as.get(i, i)
            if i in batch.failed:
                answers.append(batch.failed[i])
            else:
                answers.append(notes[batch.earlier[i] if i in batch.earlier
                                     else batch.written[i].id])
        return answers

    def cannot_supersede(self, old: int, replaced: set[int]) -> NbMemoryError | None:
        try:
            self.require_status(old, "active", "supersede")
        except NbMemoryError as exc:
            return exc
        if old in replaced:
            return Conflict(f"Cannot supersede note #{old} twice at once.")
        return None

    def _write_new(self, fresh: list[tuple[int, dict[str, Any]]],
                   ahead: dict[str, Any]) -> dict[int, Note]:
        """Embed (one call) and write (one transaction) the new notes, by request index.

        Embedding in a helper thread while the rows are inserted gained nothing here: at
        batch sizes like 4 the encode is bound by Python overhead under the GIL."""
        texts = list(dict.fromkeys(p["text"] for _, p in fresh))
        # While the owner loads the model, a store that has vectors already takes the notes
        # now and embeds them once it is loaded (Engine.embed_pending). Not a team store:
        # its other members would not hear of vectors added after the notes.
        later = (self.engine.model_loading and self.engine.stored_identity is not None
                 and not self.store.shared)
        vectors = {} if later else {t: ahead[t] for t in texts} if set(texts) <= set(ahead) \
            else dict(zip(texts, self.engine.embed(texts)))
        with self.engine.writing(None if later else len(vectors[texts[0]])) as entry:
            note_ids, seqs = self.store.allocate(len(fresh))
            rows = [{**p, "note_id": note_id, "seq": seq, "at": utcnow()}
                    for (_, p), note_id, seq in zip(fresh, note_ids, seqs)]
            entry.created(rows, vectors)
            for row in rows:
                self.store.insert_anchors(row["note_id"], list(enumerate(row["anchors"])),
                                          seq=row["seq"], at=row["at"])
            for row in rows:
                if row["supersedes"] is not None:
                    entry.append("superseded_by", row["supersedes"], actor=row["author"],
                                 at=row["at"], request_id=row["request_id"],
                                 data={"by": row["note_id"]})
            if vectors:
                self.store.put_embeddings(self.engine.embedder.name,
                                          [(p["content_hash"], vectors[p["text"]]) for _, p in fresh])
        if later:
            self.engine.unembedded.update((r["note_id"], r["text"]) for r in rows)
        # The notes as written (saves reading them back); with_stale adds their anchors.
        return {i: Note(r["note_id"], r["text"], r["kind"], r["priority"], r["tags"], "active",
                        1, r["at"], r["at"], r["author"], r["provenance"],
                        supersedes=r["supersedes"])
                for (i, _), r in zip(fresh, rows)}

    def supersede(self, note_id: int, text: str, *, kind: str | None = None,
                  priority: str | None = None, tags: str | Iterable[str] | None = None,
                  author: str | None = None, provenance: Provenance | dict | None = None,
                  about: Sequence[Any] | None = None, request_id: str | None = None) -> Note:
        """Write ``text`` as a new note that replaces ``note_id`` (kept in its history); kind,
        priority, tags and the files it is about left out are the old note's (``carried``; a
        check or a cell's output given alone, the new text's own, joins them)."""
        old = self.engine.reads.get(note_id)
        if about is None or (about and all(map(own_anchor, about))):
            about = [*self.engine.checker.carried(old.anchors), *(about or [])]
        return self.remember(text, supersedes=note_id, kind=kind or old.kind, about=about,
                             priority=priority or old.priority, provenance=provenance,
                             tags=old.tags if tags is None else tags, author=author,
                             request_id=request_id)

    def edit(self, note_id: int, *, text: str | None = None, kind: str | None = None,
             priority: str | None = None, tags: str | Iterable[str] | None = None,
             author: str | None = None, request_id: str | None = None,
             version: int | None = None) -> Note:
        """Write a new version of a note; the old version stays in its history. With
        ``version``, only over that version: an edit made from an older read is refused."""
        if version is not None and (isinstance(version, bool) or not isinstance(version, int)
                                    or version < 1):
            raise InvalidInput(f"The version an edit is made from is a whole number from 1, "
                               f"not {version!r}")
        with self.lock:
            old = self.require_status(note_id, "active", "edit")
            if version is not None and old.version != version and not (
                    request_id and self.store.request_note(request_id) is not None):
                if version > old.version:  # no read gave it: not a conflict but a mistake
                    raise InvalidInput(f"Note #{note_id} is at version {old.version}; it has "
                                       f"no version {version} to edit from. Nothing was written.")
                raise Conflict(f"Note #{note_id} is at version {old.version}, not {version}: "
                               f"it was edited since it was read. Nothing was written; read "
                               f"it again and edit version {old.version}.")
            new_text = check_text(text) if text is not None else old.text
            if unicodedata.normalize("NFC", new_text) == unicodedata.normalize("NFC", old.text):
                new_text = old.text  # é typed as e and an accent: the same text, no new version
            new_kind = check_kind(kind) if kind is not None else old.kind
            new_priority = check_priority(priority) if priority is not None else old.priority
            new_tags = normalise_tags(tags) if tags is not None else old.tags
            changed = [name for name, a, b in (("text", new_text, old.text),
                                               ("kind", new_kind, old.kind),
                                               ("priority", new_priority, old.priority),
                                               ("tags", new_tags, old.tags)) if a != b]
            if not changed:
                return old
            if request_id and (done := self.store.request_event(request_id)) is not None:
                return next((v for v in self.store.versions(note_id) if v.updated_at == done.at),
                            old)  # the version that request wrote, not a later edit's
            digest = content_hash(new_text)
            model = self.engine.embedder.name
            vector = None
            if not self.store.has_embedding(model, digest):
                vector = self.engine.embed([new_text])[0]
            author = default_author(author)
            anchors = []
            if "text" in changed:  # the paths the new text mentions replace the old text's
                anchors = self.engine.checker.reanchor_text(
                    self.store.anchors([note_id]).get(note_id, []), new_text, old.provenance,
                    self.store.next_anchor_position(note_id))
            at = utcnow()
            with self.engine.writing(len(vector) if vector is not None else None) as entry:
                # Another member may have changed the note since it was read (a team store):
                # writing the fields read then would undo that change without a word.
                now = self.require_status(note_id, "active", "edit")
                if now.version != old.version:
                    by = self.store.versions(note_id)[-1].author
                    raise Conflict(f"Note #{note_id} was edited by {by or 'someone'} "
                                   f"while this edit was written (it is version {now.version} "
                                   f"now); nothing was written. Read it again, then edit it.")
                if vector is not None:
                    self.store.put_embeddings(model, [(digest, vector)])
                elif "text" in changed:
                    vector = self.store.vectors_by_hash(model, [digest])[digest]
                seq = entry.append("edited", note_id, actor=author, at=at, request_id=request_id,
                                   data={"changed": changed}, priority=new_priority,
                                   **({"text": new_text, "vector": vector}
                                      if "text" in changed else {}))
                self.store.insert_version(note_id, text=new_text, content_hash=digest,
                                          kind=new_kind, priority=new_priority, tags=new_tags,
                                          author=author, provenance=old.provenance, at=at, seq=seq)
                self.store.insert_anchors(note_id, anchors, seq=seq, at=at)
                written = self.store.get_notes([note_id])[note_id]  # not a later one's
            if "text" in changed:  # its vector is the new text's: not the one still to embed
                self.engine.unembedded.pop(note_id, None)
            return self.engine.staleness.with_stale([written])[0]

    def require_status(self, note_id: int, status: str, action: str,
                       note: Note | None = None) -> Note:
        """``note``: as read already in this transaction (else it is read here)."""
        note_id = valid_id(note_id)
        note = note or self.store.get_notes([note_id]).get(note_id)
        if note is None:
            raise NotFound(no_note(note_id))
        if note.status == status:
            return note
        if note.status == "revoked" and action == "forget":
            raise Conflict(f"Note #{note_id} is already forgotten; {{0}} brings it back.",
                           Command("reinstate", (note_id,)))
        by = self.store.superseded_by(note_id) if note.status == "superseded" else None
        gone = by and {"revoked": "forgotten", "purged": "purged"}.get(self.store.status_of(by))
        why, then = {"revoked": ("is forgotten (revoked); reinstate it first with {0}",
                                 Command("reinstate", (note_id,))),
                     "superseded": (f"is superseded by #{by}, which was {gone}; bring it back "
                                    "first with {0}", Command("reinstate", (note_id,))) if gone
                     else (f"is superseded by #{by}, the note to correct: {{0}}",
                           Command("supersede", (by,))) if by else
                     ("is superseded; correct the note that superseded it instead", None),
                     "purged": ("was purged: its text is erased for good" if action != "reinstate"
                                else "was purged and cannot come back", None),
                     "refuted": ("is refuted; reopen it first with {0}",
                                 Command("reopen", (note_id,))),
                     "active": ("is active already: there is nothing to bring back"
                                if action == "reinstate" else "is active", None)}[note.status]
        raise Conflict(f"Cannot {action} note #{note_id}: it {why}.", *([then] if then else []))

    def _require_reinstatable(self, note_id: int, note: Note | None) -> None:
        """A forgotten note comes back, and so does a replaced one whose replacement was
        forgotten or purged: else purging a mistaken correction would leave the belief it
        replaced out of reach for good."""
        def status(of: int | None) -> str | None:
            return self.store.status_of(of) if of else None

        if note is not None and note.status == "superseded":  # its newest replacement decides
            by, seen = self.store.superseded_by(note_id), {note_id}
            while status(by) == "superseded" and by not in seen:
                seen.add(by)
                by = self.store.superseded_by(by)
            if status(by) == "active":
                raise Conflict(f"Cannot reinstate note #{note_id}: it is superseded by #{by}, "
                               f"which is active; forget #{by} first, or change it.")
            return
        replaced = note.supersedes if note is not None and note.status == "revoked" else None
        if status(replaced) == "active":  # two versions of one belief
            raise Conflict(f"Cannot reinstate note #{note_id}: the note it replaced, "
                           f"#{replaced}, is active again; forget #{replaced} first, or "
                           f"change it.")
        self.require_status(note_id, "revoked", "reinstate", note)

    def done_before(self, request_id: str | None, note_id: int) -> Note | None:
        """The note as it is now when ``request_id`` was already applied (a resent write)."""
        if request_id and self.store.request_event(request_id) is not None:
            return self.engine.reads.get(note_id)
        return None

    def forget(self, note_ids: int | Iterable[int], *, actor: str | None = None,
               request_id: str | None = None) -> list[Note]:
        """Revoke notes: hidden from recall, kept in history, reversible with reinstate."""
        _, ids = each_once(note_ids)
        if not ids:
            raise InvalidInput("Give the id of the note to forget, e.g. {0}",
                               Command("forget", (12,)))
        with self.lock:
            if request_id and self.store.request_note(request_id) is not None:
                return list(self.store.get_notes(ids).values())
            at, actor = utcnow(), default_author(actor)
            with self.engine.writing() as entry:
                # Checked inside the transaction: on a team store another member may have
                # changed the note until its lock was taken.
                known = self.store.get_notes(ids)
                for note_id in ids:
                    self.require_status(note_id, "active", "forget", known.get(note_id))
                entry.append_each("revoked", ids, actor=actor, at=at, request_id=request_id)
            notes = self.store.get_notes(ids)
            return [notes[i] for i in ids]

    def reinstate(self, note_id: int | Iterable[int], *, actor: str | None = None,
                  request_id: str | None = None) -> Note | list[Note]:
        """Bring back forgotten (revoked) notes, or replaced ones whose replacement is gone:
        one id gives its note, several a list, and either all of them come back or none does."""
        single, ids = each_once(note_id)
        if not ids:
            raise InvalidInput("Give the id of the note to reinstate, e.g. {0}",
                               Command("reinstate", (12,)))
        with self.lock:
            if not (request_id and self.store.request_event(request_id) is not None):
                at, actor = utcnow(), default_author(actor)
                with self.engine.writing() as entry:
                    known = self.store.get_notes(ids)  # inside the transaction, as forget's
                    for one in ids:
                        self._require_reinstatable(one, known.get(one))
                        replaced = known[one].supersedes if known[one].status == "revoked" else None
                        if replaced in ids:  # each alone may come back, not both: two beliefs
                            raise Conflict(f"Cannot reinstate #{replaced} and #{one} together: "
                                           f"#{one} replaced #{replaced}. Reinstate the one you "
                                           f"believe.")
                    entry.append_each("reinstated", ids, actor=actor, at=at, request_id=request_id)
            known = self.store.get_notes(ids)
            notes = self.engine.staleness.with_stale([known[one] for one in ids])
            return notes[0] if single else notes

    def purge(self, note_id: int, *, actor: str | None = None,
              request_id: str | None = None) -> Note:
        """Erase a note's text and vectors for good. The journal keeps that it happened."""
        with self.lock:
            if (done := self.done_before(request_id, note_id)) is not None:
                self.finish_purges()  # sent again: the first may have died before erasing
                return done
            note_id = valid_id(note_id)
            note = self.store.get_notes([note_id]).get(note_id)
            if note is None:
                raise NotFound(no_note(note_id))
            if note.status == "purged":
                raise Conflict(f"Note #{note_id} is already purged.")
            owners = getattr(self.store, "purge_owners", ())
            if owners:
                raise Conflict(
                    f"Only the owner of the team store's tables ({', '.join(owners)}) can "
                    f"purge: PostgreSQL lets only a table's owner rewrite it, and without that "
                    f"the text of #{note_id} would stay in the server's files. Nothing was "
                    f"changed. Ask {owners[0]} to purge it, or give the tables to a role you "
                    f"are a member of (docs/team.md, Permissions).")
            self.engine.recalls.flush_log()  # so that the purge scrubs queries not yet written
            with self.engine.writing() as entry:
                entry.append("purged", note_id, actor=default_author(actor), at=utcnow(),
                             request_id=request_id)
                quoting = self.store.purge_quotes(note_id)  # before its texts are erased
                self.store.purge_text(note_id)
                self.store.purge_anchors(note_id)
                self.store.purge_snapshot_flags(note_id)
                self.store.set_meta(PURGE_UNFINISHED, "1")
            self.engine.recalls.forget_past()
            self.store.forget_cached(quoting)
            self.engine.cards.sync(quoting)  # their cards quote it too
            if quoting and self.engine.mirror is not None:  # this machine's copy of a team store
                self.engine.mirror.copy(quoting)
                self.engine.mirror.store.compact()
            self.finish_purges()
            return self.engine.reads.get(note_id)

    def finish_purges(self) -> None:
        """Erase what a committed purge left in files: the index files are written again
        and the store is compacted. A purge killed before it did so is finished here, at
        the next open or when it is sent again."""
        if not self.store.meta(PURGE_UNFINISHED):
            return
        try:
            for index in (self.engine.keywords, self.engine.cards, self.engine.dense):
                index.save(force=True)
        except (OSError, RuntimeError) as exc:  # usearch says its I/O errors as RuntimeError
            raise StoreUnavailable(
                f"The purge is recorded, but the index files that may still hold its text could "
                f"not be written again ({exc}). Free some space (or make the store writable); "
                f"they are rewritten at the next open, or when the purge is sent again.") from None
        self.store.compact()
        with self.store.transaction():
            self.store.set_meta(PURGE_UNFINISHED, "")
