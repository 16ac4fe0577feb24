"""The notes routes: list and remember, one note with its history, edit, supersede,
forget, reinstate and verify."""

from __future__ import annotations

import json

from ..errors import InvalidInput
from ..models import Note
from .handlers import NbMemoryHandler, api, missing_feature, note_id
from .origin import panel_provenance, provenance_fields
from .shared import MAX_PAGE


class NotesHandler(NbMemoryHandler):
    @api
    async def get(self):
        """A page of notes, newest first, filtered by tags, kind, priority, status, staleness,
        author (or mine)."""
        offset = self.int_arg("offset", 0)
        limit = self.int_arg("limit", 50, low=1, high=MAX_PAGE)
        wanted = self.stale_arg()
        filters = dict(tags=self.arg("tags"), kind=self.arg("kind"),
                       priority=self.arg("priority"), since=self.time_arg("since"),
                       until=self.time_arg("until"), order=self.arg("order", "newest"),
                       # "active, revoked" as the CLI takes it: the engine splits and trims
                       status=self.arg("status", "active"), author=self.author_arg())

        def listing(memory):
            page = memory.notes(offset=offset, limit=limit, stale=wanted, **filters)
            return {"notes": [self.note(n) for n in page.notes], "total": page.total,
                    "offset": offset, "limit": limit, "behind": page.behind}

        self.reply(await self.call(listing, "notes"))

    @api
    async def post(self):
        """Remember a note written in the panel, from a notebook's cell if it says which."""
        data = self.body(("text", "kind", "priority", "tags", "supersedes", "provenance"),
                         required=("text",))
        supersedes = data.pop("supersedes", None)
        if supersedes is not None and (isinstance(supersedes, bool)
                                       or not isinstance(supersedes, int)):
            raise InvalidInput("Field 'supersedes' must be a note id, a whole number such as "
                               f"12, not {json.dumps(supersedes)[:40]}.")
        where = provenance_fields(data.get("provenance"), self.root)
        author = self.user()

        def remember(memory):
            # Kind, priority and tags not sent: the defaults, or the superseded note's.
            return memory.remember_with_similar(
                data["text"], kind=data.get("kind") or None,
                priority=data.get("priority") or None, tags=data.get("tags"),
                supersedes=supersedes, author=author, similar=0,
                provenance=panel_provenance(where, author, self.root))[0]

        note = await self.call(remember, "remember")
        self.reply(self.note(note), status=201)


class NoteHandler(NbMemoryHandler):
    @api
    async def get(self, ident: str):
        """One note (any status) with its history and every version's text."""
        def detail(memory):
            note = memory.get(note_id(ident))
            return {"note": self.note(note), **({"behind": note.behind} if note.behind else {}),
                    "history": [e.to_dict() for e in memory.history(note.id)],
                    "versions": [v.to_dict() for v in memory.versions(note.id)]}

        self.reply(await self.call(detail, "get"))

    @api
    async def patch(self, ident: str):
        """Edit: write a new version with the given fields changed (``version``: only over
        that version, else 409)."""
        data = self.body(("text", "kind", "priority", "tags", "version"))
        if not set(data) - {"version"}:
            raise InvalidInput("Nothing to change; send text, kind, priority or tags.")
        empty = sorted(name for name, value in data.items() if value is None)
        if empty:  # null is not "unchanged": that is a field left out
            raise InvalidInput(f"Field(s) {', '.join(empty)} are null; leave out a field to "
                               "keep it as it is.")
        version = data.get("version")
        if version is not None and (not isinstance(version, int) or isinstance(version, bool)
                                    or version < 1):
            raise InvalidInput("Field 'version' is the version the edit was made from, a "
                               "whole number from 1.")
        author = self.user()
        note = await self.call(lambda m: m.edit(note_id(ident), author=author, **data), "edit")
        self.reply(self.note(note))


class SupersedeHandler(NbMemoryHandler):
    @api
    async def post(self, ident: str):
        """Store a new note replacing this one (kept in history, marked superseded)."""
        data = self.body(("text", "kind", "priority", "tags"), required=("text",))
        text = data.pop("text")
        options = {k: v for k, v in data.items() if v is not None}
        author = self.user()
        note = await self.call(lambda m: m.supersede(
            note_id(ident), text, author=author,
            provenance=panel_provenance({}, author, self.root), **options), "supersede")
        self.reply(self.note(note), status=201)


class ForgetHandler(NbMemoryHandler):
    @api
    async def post(self, ident: str):
        """Revoke a note (reversible with reinstate)."""
        self.body(())
        actor = self.user()
        notes = await self.call(lambda m: m.forget(note_id(ident), actor=actor), "forget")
        self.reply(self.note(notes[0]))


class ReinstateHandler(NbMemoryHandler):
    @api
    async def post(self, ident: str):
        """Undo forget."""
        self.body(())
        actor = self.user()
        note = await self.call(lambda m: m.reinstate(note_id(ident), actor=actor), "reinstate")
        self.reply(self.note(note))


class VerifyHandler(NbMemoryHandler):
    @api
    async def post(self, ident: str):
        """Re-take the note's anchor fingerprints and clear stale flags that no longer hold."""
        self.body(())
        actor = self.user()

        def verify(memory):
            if not hasattr(memory, "verify"):
                raise missing_feature("verify notes")
            result = memory.verify(note_id(ident), actor=actor)
            if isinstance(result, Note):
                return self.note(result)
            return result.to_dict() if hasattr(result, "to_dict") else result

        self.reply(await self.call(verify, "verify"))
