"""The cheap routes the panel polls: the version handshake, the store's status with its
stale digest, and who owns the store. ``version``, ``owner`` and ``status?start=false``
with no owner running never wait for the store's worker thread."""

from __future__ import annotations

import asyncio
import hashlib
import json
from typing import Any

from .. import __version__
from .handlers import NbMemoryHandler, api
from .shared import MAX_PAGE, NAMESPACE


def stale_digest(memory) -> dict[str, Any]:
    """The stale set in a few bytes: which active notes are stale and why.

    The panel compares it between polls, so a file changing on disk (which writes nothing
    to the journal) still refreshes the badges.
    """
    entries, offset = [], 0
    while True:
        page = memory.stale(offset=offset, limit=MAX_PAGE)
        entries += [[n.id, n.version, sorted([r.reason, r.target, r.detail] for r in n.stale)]
                    for n in page.notes]
        offset += MAX_PAGE
        if offset >= page.total:
            break
    entries.sort()
    digest = hashlib.sha1(json.dumps(entries).encode()).hexdigest()[:16]
    return {"stale": len(entries), "stale_digest": digest}


async def owner_state(host) -> dict[str, Any]:
    """The host's owner probe, on a thread of its own (never behind the worker)."""
    return await asyncio.get_running_loop().run_in_executor(None, host.owner_state)


class VersionHandler(NbMemoryHandler):
    """The version handshake: cheap, never opens the store. ``owner_running`` tells the
    panel whether its first request will have to start the store's owner (slow)."""

    @api
    async def get(self):
        state = await owner_state(self.host)
        self.reply({"version": __version__, "api": 1, "namespace": NAMESPACE,
                    "owner_running": state["running"] and not state["opening"]})


class StatusHandler(NbMemoryHandler):
    @api
    async def get(self):
        """The store's status and stale digest. ``start=false`` (the panel's poll) starts
        no owner: with none running it answers ``{"running": false, ...}`` at once."""
        if not self.flag("start", default=True):
            state = await owner_state(self.host)
            if not state["running"]:
                self.reply(self.host.not_running())
                return

        def status(memory):
            return {**self.host.status(memory), **stale_digest(memory)}

        self.reply(await self.call(status, "status"))


class OwnerHandler(NbMemoryHandler):
    """Who serves the store and what the server waits for: never queued behind the worker,
    never starts an owner. The panel asks while a request is slow, to say why."""

    @api
    async def get(self):
        self.reply(await owner_state(self.host))
