"""The rows of a store that belong to chosen notes: what sharing them exports
(:func:`nbmemory.exchange.export_jsonl` with ``ids``)."""

from __future__ import annotations

import json

from .store import Store


class Subset:
    """Which rows of a store belong to the notes ``ids``, their links to other notes cut."""

    def __init__(self, store: Store, ids: set[int]):
        self.ids = ids
        self.hashes = {r[0] for batch in store.table_rows("note_versions", ["content_hash",
                                                                             "note_id"])
                       for r in batch if r[1] in ids}

    def row(self, table: str, record: dict) -> dict | None:
        if table == "embeddings":
            return record if record["content_hash"] in self.hashes else None
        owner = record.get("id") if table == "notes" else record.get("note_id")
        if owner not in self.ids:
            return None
        if table == "notes" and record.get("supersedes") not in self.ids:
            record = {**record, "supersedes": None}
        if table == "events" and record.get("data"):
            data = json.loads(record["data"])
            for key in ("supersedes", "by"):
                if key in data and data[key] not in self.ids:
                    del data[key]
            record = {**record, "data": json.dumps(data) if data else None}
        return record
