"""The rows of a store that belong to chosen notes: what sharing them exports
(:func:`nbmemory.exchange.export_jsonl` with ``ids``)."""

from __future__ import annotations

import json
import os

from .store import Store


class Subset:
    """Which rows of a store belong to the notes ``ids``, their links to other notes cut."""

    def __init__(self, store: Store, ids: set[int], repo: str | None = None):
        self.ids, self.repo = ids, repo
        self.uids = {r[0]: r[1] for batch in store.table_rows("notes", ["id", "uid"])
                     for r in batch}
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
        if table == "anchors" and self.repo and record.get("kind") in ("file", "data", "dir") \
                and not os.path.isabs(record.get("target") or "/"):
            # Relative to a workspace that is a git checkout: said by the repository's
            # identity, so that each member of a team store checks their own checkout.
            fingerprint = record["fingerprint"]
            data = json.loads(fingerprint) if isinstance(fingerprint, str) else dict(fingerprint)
            if "repo" not in data:
                data["repo"] = self.repo
                record = {**record, "fingerprint": json.dumps(data)
                          if isinstance(fingerprint, str) else data}
        if table == "events" and record.get("data"):
            data = json.loads(record["data"])
            for key in ("supersedes", "by"):
                if key in data and data[key] not in self.ids:
                    # By its uid: the other store links the two if it has that note.
                    data[f"{key}_uid"] = self.uids.get(data.pop(key))
            record = {**record, "data": json.dumps(data) if data else None}
        return record
