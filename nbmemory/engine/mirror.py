"""A team store's notes mirrored on this machine, so reads go on while the server is away.

One more projection of the journal: the current rows of ``notes`` and ``anchors``, the
vectors of their texts (and the embedder's identity) in a DuckDB store in the local cache
directory, brought up to date after each commit this member makes or catches up. When
PostgreSQL cannot be reached, recall, listing and reading a note answer from it (with the
indexes, which are local anyway) and say that the answer may be behind; writes wait for the
server. Its vectors let an owner start while the server is away (away.py).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Sequence

from ..models import Hits, Note, Page
from ..store import Store
from ..store.filters import _id_list

MIRROR_DIRNAME = "mirror"
TABLES = ("notes", "anchors")
WITH_VECTORS = "mirrored_vectors"  # meta: the copy holds its notes' vectors (copies made
# before it did not: the next catch-up copies every note again)


class Mirror:
    def __init__(self, directory: Path, primary: Store | None):
        path = Path(directory) / MIRROR_DIRNAME
        path.mkdir(mode=0o700, exist_ok=True)
        self.store = Store(path)
        self.primary = primary
        self.position = int(self.store.meta("mirrored_position", "0") or 0)
        self.synced_at: str | None = self.store.meta("mirrored_at")

    def close(self, *, checkpoint: bool = True) -> None:
        self.store.close(checkpoint=checkpoint)

    def catch_up(self, upto: int, at: str) -> None:
        """Copy the notes changed since the last copy (all of them the first time)."""
        whole = not self.store.meta(WITH_VECTORS)
        if upto <= self.position and not whole:
            return
        changed = self.primary.changed_since(0 if whole else self.position)
        self.copy(changed)
        embedder = self.primary.meta("embedder")
        with self.store.transaction():
            if embedder:
                self.store.set_meta("embedder", embedder)
            self.store.set_meta("mirrored_position", str(upto))
            self.store.set_meta("mirrored_at", at)
            self.store.set_meta(WITH_VECTORS, "1")
        self.position, self.synced_at = upto, at

    def copy(self, note_ids: Sequence[int]) -> None:
        purged = False
        for start in range(0, len(note_ids), 2000):
            ids = _id_list(note_ids[start:start + 2000])
            rows = {}
            for table in TABLES:
                columns = list(self.store.tables()[table])
                key = "id" if table == "notes" else "note_id"
                rows[table] = (columns, self.primary.con.execute(
                    f"SELECT {', '.join(columns)} FROM {table} WHERE {key} IN ({ids})").fetchall())
            rows["embeddings"] = self._vectors(ids)
            with self.store.transaction():
                before = [r[0] for r in self.store.con.execute(
                    f"SELECT DISTINCT content_hash FROM notes WHERE id IN ({ids})").fetchall()]
                for table, (columns, found) in rows.items():
                    if table == "embeddings":  # by text: the vectors of the texts now
                        if hashes := sorted({r[0] for r in found}):  # content_hash first
                            self.store.con.execute("DELETE FROM embeddings WHERE content_hash "
                                                   "IN (SELECT unnest(?))", [hashes])
                    else:
                        key = "id" if table == "notes" else "note_id"
                        self.store.con.execute(f"DELETE FROM {table} WHERE {key} IN ({ids})")
                    self.store.insert_rows(table, columns, found)
                if before:  # none of a text no note has any more (edited, purged)
                    self.store.con.execute(
                        "DELETE FROM embeddings WHERE content_hash IN (SELECT unnest(?)) AND "
                        "content_hash NOT IN (SELECT content_hash FROM notes)", [before])
            self.store.forget_cached(note_ids[start:start + 2000])
            purged = purged or bool(self.store.con.execute(
                f"SELECT 1 FROM notes WHERE id IN ({ids}) AND status = 'purged'").fetchone())
        if purged:
            # As in the store itself: no free block of this file may keep a purged text.
            self.store.compact()

    def _vectors(self, ids: str) -> tuple[list[str], list[tuple]]:
        columns = list(self.store.tables()["embeddings"])
        return columns, self.primary.con.execute(
            f"SELECT {', '.join(columns)} FROM embeddings WHERE content_hash IN "
            f"(SELECT content_hash FROM notes WHERE id IN ({ids}))").fetchall()


def from_mirror(engine, read):
    """``read()`` against this machine's mirror of the engine's team store, marked as such."""
    with engine.lock:
        primary, engine.store = engine.store, engine.mirror.store
        engine._identity = None
        try:
            result = read()
        finally:
            engine.store, engine._identity = primary, None
    behind = (f"The team store is unreachable: these come from this machine's copy as of "
              f"{engine.mirror.synced_at}, possibly behind.")
    if isinstance(result, Hits):
        result.behind = behind
    elif isinstance(result, (Page, Note)):
        result = dataclasses.replace(result, behind=behind)
    return result
