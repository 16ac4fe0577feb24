"""The checks route: what each note's check last gave, for the panel. The server never
evaluates a check; the panel asks the notebook's kernel to (``%memory check ID``)."""

from __future__ import annotations

from typing import Any

from .handlers import NbMemoryHandler, api


def check_json(item: dict[str, Any]) -> dict[str, Any]:
    return {"note_id": item["note"].id, "expression": item["expression"],
            "names": list(item["names"]), "value": item["value"],
            "trusted": item["trusted"], "last": item["last"],
            "written_at": item["note"].created_at.isoformat()
            if item["note"].created_at else None}


class ChecksHandler(NbMemoryHandler):
    @api
    async def get(self):
        """Every check of an active note: its expression, the value it had when written,
        whether the requesting user trusts it, and its latest outcome (or null)."""
        actor = self.user()
        checks = await self.call(lambda m: m.checks(actor=actor), "checks")
        self.reply({"checks": [check_json(c) for c in checks]})
