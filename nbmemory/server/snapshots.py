"""The snapshot routes: list, seal, and what changed between two snapshots."""

from __future__ import annotations

from ..errors import InvalidInput
from .handlers import NbMemoryHandler, api, missing_feature


class SnapshotsHandler(NbMemoryHandler):
    @api
    async def get(self):
        snapshots = await self.call(lambda m: m.snapshots(), "snapshots")
        self.reply({"snapshots": [s.to_dict() for s in snapshots]})

    @api
    async def post(self):
        """Seal a snapshot of the current state."""
        data = self.body(("name", "message"), required=("name",))
        author = self.user()
        snap = await self.call(lambda m: m.snapshot(data["name"], message=data.get("message") or "",
                                                    author=author), "snapshot")
        self.reply(snap.to_dict(), status=201)


class SnapshotDiffHandler(NbMemoryHandler):
    @api
    async def get(self):
        """What changed between two snapshots (``to`` may be omitted: now)."""
        before = self.arg("from")
        if before is None:
            raise InvalidInput("Give the snapshot to compare from: "
                               "/nbmemory/snapshots/diff?from=NAME&to=NAME")
        after = self.arg("to")

        def diff(memory):
            if not hasattr(memory, "snapshot_diff"):
                raise missing_feature("diff snapshots")
            data = memory.snapshot_diff(before, after).to_dict()
            for change in data["changes"]:
                change["note"] = self.note(change["note"])
            return data

        self.reply(await self.call(diff, "snapshot_diff"))
