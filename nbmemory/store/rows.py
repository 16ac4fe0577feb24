"""The store's rows beside the journal and the notes: vectors by content hash, snapshots,
the recall log, anchors, what bulk requests answered, and whole tables for the exchange
format."""

from __future__ import annotations

import json
import re
from datetime import datetime
from typing import Any, Iterator, Sequence

import numpy as np

from ..models import Anchor, Note, Snapshot
from .filters import _ACTIVE_AFTER, _NOTE_FROM, _STATUS_EVENTS, _aware, _id_list, _naive, _note

_RECALL_LOG_COLUMNS = ("logged_at", "query", "k", "returned", "lexical", "dense", "filtered_out")

# A vector is stored in half precision behind this marker, a float32 NaN that no embedding
# holds, so rows written before as plain float32 still read: a MiniLM vector takes 772
# bytes instead of 1,536 (at 1M notes, 0.77 GB of the store's 2.8 GB). A cosine moves by
# at most about 3e-5; the rows copy recall scores against is float16 past 131k rows anyway.
_HALF = np.array([np.nan], np.float32).tobytes()


def encode_vector(vector: np.ndarray) -> bytes:
    return _HALF + np.asarray(vector, np.float32).astype(np.float16).tobytes()


def as_stored(vectors: np.ndarray) -> np.ndarray:
    """``vectors`` at the precision the store keeps them, so that an index fed them scores
    as one rebuilt from the store would."""
    return np.asarray(vectors, np.float32).astype(np.float16).astype(np.float32)


def decode_vector(blob: bytes) -> np.ndarray:
    if blob[:4] == _HALF:
        return np.frombuffer(blob, np.float16, offset=4).astype(np.float32)
    return np.frombuffer(blob, np.float32)


def decode_vectors(blobs: Sequence[bytes]) -> np.ndarray:
    """One float32 row per blob; a run of half-precision rows is decoded in one pass."""
    if blobs and len({len(b) for b in blobs}) == 1 and all(b[:4] == _HALF for b in blobs):
        matrix = np.frombuffer(b"".join(blobs), np.float16).reshape(len(blobs), -1)
        return matrix[:, 2:].astype(np.float32)  # the marker is the first two halves
    return np.vstack([decode_vector(b) for b in blobs])


class Rows:
    """Mixed into :class:`~.duckdb.Store` (which holds ``con`` and the caches)."""

    def _by_hash(self, columns: str, model: str, hashes: Sequence[str]) -> list[tuple]:
        """Rows of ``embeddings`` for ``hashes`` and ``model``, through the hash index.

        Only ``content_hash IN (?, ...)`` uses the index; a predicate on ``model`` in the same
        query makes DuckDB scan, so the model is checked here.
        """
        hashes = list(dict.fromkeys(hashes))
        rows: list[tuple] = []
        for start in range(0, len(hashes), 500):
            chunk = hashes[start:start + 500]
            rows += self.con.execute(
                f"SELECT model, {columns} FROM embeddings WHERE content_hash IN "
                f"({', '.join('?' * len(chunk))})", chunk).fetchall()
        return [row[1:] for row in rows if row[0] == model]

    def kept_hashes(self, hashes: Sequence[str]) -> set[str]:
        """Those of ``hashes`` a kept version of a note holds (a purged note's hold none)."""
        hashes, kept = list(dict.fromkeys(hashes)), set()
        for start in range(0, len(hashes), 500):
            chunk = hashes[start:start + 500]
            kept.update(h for (h,) in self.con.execute(
                f"SELECT DISTINCT content_hash FROM note_versions WHERE content_hash IN "
                f"({', '.join('?' * len(chunk))})", chunk).fetchall())
        return kept

    def vectors_by_hash(self, model: str, hashes: Sequence[str]) -> dict[str, np.ndarray]:
        rows = self._by_hash("content_hash, vector", model, hashes)
        return {h: decode_vector(v) for h, v in rows}

    # -- vectors ------------------------------------------------------------------------

    def put_embeddings(self, model: str, items: Sequence[tuple[str, np.ndarray]]) -> None:
        items = list({h: (h, v) for h, v in reversed(items)}.values())  # one row per hash
        # INSERT OR IGNORE checks the composite key by scanning (6 ms at 100k rows): skip
        # the hashes already stored through the index, then insert plainly.
        stored = {h for (h,) in self._by_hash("content_hash", model, [h for h, _ in items])}
        items = [(h, v) for h, v in items if h not in stored]
        # Multi-row statements: executemany costs a statement per row.
        for start in range(0, len(items), 500):
            chunk = items[start:start + 500]
            self.con.execute(
                "INSERT INTO embeddings VALUES " + ", ".join(["(?, ?, ?)"] * len(chunk)),
                [x for h, v in chunk for x in (h, model, encode_vector(v))],
            )

    def embedded(self, model: str, hashes: Sequence[str]) -> set[str]:
        """Which of ``hashes`` have a vector for ``model``."""
        return {h for (h,) in self._by_hash("content_hash", model, hashes)}

    def has_embedding(self, model: str, content_hash: str) -> bool:
        return bool(self._by_hash("content_hash", model, [content_hash]))

    def vector_chunks(self, model: str, statuses: Sequence[str],
                      size: int = 5_000) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        """Ids and current vectors for ``model`` of every note in ``statuses``, ``size`` at
        a time, in no particular order: one pass (at 1M notes, reading them by lists of
        5,000 ids joined the tables once a list: 31 s, and DuckDB kept what it read)."""
        result = self.con.execute(
            f"SELECT n.id, e.vector FROM {_NOTE_FROM} JOIN embeddings e ON e.content_hash = "
            "n.content_hash AND e.model = ? WHERE n.status IN (SELECT unnest(?))",
            [model, list(statuses)])
        while rows := result.fetchmany(size):
            keys = np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))
            yield keys, decode_vectors([r[1] for r in rows])

    def vectors(self, model: str, ids: Sequence[int] | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Ids and current vectors of active notes (or of ``ids``) for ``model``."""
        sql = (f"SELECT n.id, e.vector FROM {_NOTE_FROM} "
               "JOIN embeddings e ON e.content_hash = n.content_hash AND e.model = ? ")
        params: list[Any] = [model]
        if ids is None:
            sql += "WHERE n.status = 'active'"
        else:
            sql += "WHERE n.id IN (SELECT unnest(?))"
            params.append([int(i) for i in ids])
        rows = self.con.execute(sql + " ORDER BY n.id", params).fetchall()
        if not rows:
            return np.empty(0, np.int64), np.empty((0, 0), np.float32)
        keys = np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))
        return keys, decode_vectors([r[1] for r in rows])

    def texts_missing_embedding(self, model: str) -> list[tuple[str, str]]:
        """(content_hash, text) of every kept version with no vector for ``model``.

        Past versions count too, so recall as of a snapshot works after a model change.
        """
        return self.con.execute(
            "SELECT DISTINCT v.content_hash, v.text FROM note_versions v "
            "JOIN notes n ON n.id = v.note_id WHERE n.status <> 'purged' "
            "AND NOT EXISTS (SELECT 1 FROM embeddings e "
            "WHERE e.content_hash = v.content_hash AND e.model = ?) ORDER BY 1", [model]
        ).fetchall()

    def models(self) -> list[str]:
        return [r[0] for r in self.con.execute("SELECT DISTINCT model FROM embeddings").fetchall()]

    # -- snapshots ----------------------------------------------------------------------

    def add_snapshot(self, name: str, *, seq: int, at: datetime, message: str,
                     author: str | None, stale: dict) -> None:
        self.con.execute("INSERT INTO snapshots VALUES (?, ?, ?, ?, ?, ?)",
                         [name, seq, _naive(at), message, author, json.dumps(stale)])

    def snapshot_stale(self, name: str) -> dict:
        """The stale flags recorded when snapshot ``name`` was sealed: {note id: [reason dicts]}."""
        row = self.con.execute("SELECT stale FROM snapshots WHERE name = ?", [name]).fetchone()
        return json.loads(row[0]) if row and row[0] else {}

    def changed_since(self, seq: int) -> list[int]:
        """The notes with events after ``seq``. A purge rewrites the provenance of the notes
        whose cell quoted it (:meth:`purge_quotes`) without events of their own: when one is
        among them, every note a purge scrubbed is read again too (purges are rare)."""
        rows = self.con.execute(
            "SELECT note_id, bool_or(type = 'purged') FROM events WHERE seq > ? AND note_id "
            "IS NOT NULL GROUP BY note_id", [seq]).fetchall()
        changed = [r[0] for r in rows]
        if any(r[1] for r in rows):
            where = self._CONTAINS.format("CAST(provenance AS VARCHAR)", "'[purged]'")
            seen = set(changed)
            changed += [r[0] for r in self.con.execute(
                f"SELECT id FROM notes WHERE {where}").fetchall() if r[0] not in seen]
        return changed

    def purge_quotes(self, note_id: int) -> list[int]:
        """Take a note's texts (call before they are erased) out of the cell sources other
        notes keep as provenance (one cell may write several notes: a loop of %remember);
        the notes changed."""
        texts = [r[0] for r in self.con.execute(
            "SELECT DISTINCT text FROM note_versions WHERE note_id = ? AND text <> ''",
            [note_id]).fetchall()]
        changed = set()
        for text in texts:
            # A run of plain characters reads the same inside JSON: it finds the candidates.
            plain = max(re.findall(r"[A-Za-z0-9 _.,:;-]+", text) or [""], key=len)
            where = self._CONTAINS.format("CAST(provenance AS VARCHAR)", "?")
            for table, key in (("notes", "id"), ("note_versions", "note_id")):
                for ident, version, provenance in self.con.execute(
                        f"SELECT {key}, {'version' if table == 'note_versions' else 0}, "
                        f"CAST(provenance AS VARCHAR) FROM {table} WHERE {key} <> ? AND "
                        f"provenance IS NOT NULL AND {where}", [note_id, plain]).fetchall():
                    fields = json.loads(provenance)
                    if text in (fields.get("cell_source") or ""):
                        fields["cell_source"] = fields["cell_source"].replace(text, "[purged]")
                        self.con.execute(f"UPDATE {table} SET provenance = ? WHERE {key} = ? "
                                         f"AND {'version' if table == 'note_versions' else 0} "
                                         "= ?", [json.dumps(fields), ident, version])
                        changed.add(ident)
        return sorted(changed)

    def purge_snapshot_flags(self, note_id: int) -> None:
        """Keep only the kind of each stale flag a snapshot sealed for a purged note: its
        target and detail may hold the note's words (a check's expression, the value seen)."""
        def scrub(flags: dict) -> dict:
            return {key: scrub(value) if key.startswith("@") else
                    [{"reason": r["reason"], "target": "", "detail": ""} for r in value]
                    if key == str(note_id) else value for key, value in flags.items()}

        for name, stale in self.con.execute(
                "SELECT name, stale FROM snapshots WHERE stale IS NOT NULL").fetchall():
            flags = json.loads(stale)
            if scrub(flags) != flags:
                self.con.execute("UPDATE snapshots SET stale = ? WHERE name = ?",
                                 [json.dumps(scrub(flags)), name])

    def snapshots(self, name: str | None = None) -> list[Snapshot]:
        where, params = ("WHERE name = ?", [name]) if name is not None else ("", [])
        rows = self.con.execute(
            f"SELECT name, seq, sealed_at, message, author FROM snapshots {where} ORDER BY seq, name",
            params).fetchall()
        return [Snapshot(r[0], r[1], _aware(r[2]), r[3], r[4], self.count_active_at(r[1]))
                for r in rows]

    def count_active_at(self, seq: int) -> int:
        return self.con.execute(
            "SELECT count(*) FROM (SELECT note_id, arg_max(type, seq) AS last_type FROM events "
            f"WHERE seq <= ? AND note_id IS NOT NULL AND type IN ({_STATUS_EVENTS}) "
            f"GROUP BY note_id) WHERE last_type IN ({_ACTIVE_AFTER})",
            [seq]).fetchone()[0]

    # -- recall log ---------------------------------------------------------------------

    def log_recalls(self, entries: Sequence[dict]) -> None:
        """Append recall log entries (at, query, k, returned, lexical, dense, filtered_out),
        in one statement: ``executemany`` took 77 ms for a batch of 100 (a pause in every
        hundredth recall)."""
        self.insert_rows("recall_log", _RECALL_LOG_COLUMNS,
                         [[_naive(e["at"]), e["query"], e["k"], e["returned"], e["lexical"],
                           e["dense"], e["filtered_out"]] for e in entries])

    def recall_stats(self) -> dict[str, int]:
        total, empty = self.con.execute(
            "SELECT count(*), count(*) FILTER (WHERE returned = 0) FROM recall_log").fetchone()
        return {"recalls": total, "empty_recalls": empty}

    # -- anchors ------------------------------------------------------------------------
    # Reads are served from memory (a recall must not pay a query for them). The first
    # read loads the anchors of every note up to the highest id then; a note above that
    # id is read when first asked for. Rows of existing notes change only through
    # insert_anchors and purge_anchors, which mark the note to be read again (safe even
    # if the transaction rolls back); an import only adds notes with new, higher ids.

    def insert_anchors(self, note_id: int, anchors: Sequence[tuple[int, Anchor]], *,
                       seq: int, at: datetime) -> None:
        """Record fingerprints of ``(position, anchor)`` taken at journal position ``seq``."""
        self._anchor_cache[note_id] = None
        if anchors:
            self.con.executemany(
                "INSERT INTO anchors VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                [[note_id, position, a.kind, a.target, a.origin, seq, _naive(at),
                  json.dumps(a.fingerprint)] for position, a in anchors])

    def anchors(self, note_ids: Sequence[int]) -> dict[int, list[tuple[int, Anchor]]]:
        """The current ``(position, anchor)`` list of each note (the latest fingerprint)."""
        cache = self._anchor_cache
        if self._anchors_upto is None:
            self._anchors_upto = self.con.execute(
                "SELECT coalesce(max(id), 0) FROM notes").fetchone()[0]
            cache.clear()
            self._read_anchors(None)
        ids = [int(i) for i in note_ids]
        upto = self._anchors_upto
        stale = [i for i in ids if (i in cache and cache[i] is None) or (i > upto and i not in cache)]
        if stale:
            self._read_anchors(stale)
        return {i: cache[i] for i in ids if cache.get(i)}

    def anchors_at(self, note_ids: Sequence[int], seq: int) -> dict[int, list[tuple[int, Anchor]]]:
        """The ``(position, anchor)`` list of each note as of journal position ``seq``."""
        rows = self._latest_anchors("WHERE note_id IN (SELECT unnest(?)) AND seq <= ?",
                                    [[int(i) for i in note_ids], seq])
        out: dict[int, list[tuple[int, Anchor]]] = {}
        for note_id, position, kind, target, origin, fingerprint in rows:
            fingerprint = json.loads(fingerprint)
            if not fingerprint.get("dropped"):
                out.setdefault(note_id, []).append((position, Anchor(kind, target, fingerprint, origin)))
        return out

    def _read_anchors(self, ids: list[int] | None) -> None:
        where, params = ("WHERE note_id IN (SELECT unnest(?))", [ids]) if ids is not None else ("", [])
        rows = self._latest_anchors(where, params)
        cache = self._anchor_cache
        for note_id in ids or ():
            cache[note_id] = []
        for note_id, position, kind, target, origin, fingerprint in rows:
            fingerprint = json.loads(fingerprint)
            if not fingerprint.get("dropped"):  # no longer mentioned after an edit
                cache.setdefault(note_id, []).append(
                    (position, Anchor(kind, target, fingerprint, origin)))

    def _latest_anchors(self, where: str, params: list) -> list[tuple]:
        """(note_id, position, kind, target, origin, fingerprint): each anchor's latest row."""
        return self.con.execute(
            f"SELECT note_id, position, kind, target, origin, fingerprint FROM anchors {where} "
            "QUALIFY row_number() OVER (PARTITION BY note_id, position ORDER BY seq DESC) = 1 "
            "ORDER BY note_id, position", params).fetchall()

    def next_anchor_position(self, note_id: int) -> int:
        return self.con.execute("SELECT coalesce(max(position) + 1, 0) FROM anchors "
                                "WHERE note_id = ?", [note_id]).fetchone()[0]

    def purge_anchors(self, note_id: int) -> None:
        """Erase what a purged note was about (paths, fingerprints), with its text."""
        self._anchor_cache[note_id] = None
        self.con.execute("DELETE FROM anchors WHERE note_id = ?", [note_id])

    def anchored_note_ids(self, statuses: Sequence[str] = ("active",)) -> list[int]:
        rows = self.con.execute(
            "SELECT DISTINCT a.note_id FROM anchors a JOIN notes n ON n.id = a.note_id "
            "WHERE n.status IN (SELECT unnest(?)) ORDER BY a.note_id", [list(statuses)]).fetchall()
        return [r[0] for r in rows]

    def variable_targets(self, scope: str) -> list[str]:
        """Names of variables that active notes are anchored to in ``scope`` (a notebook)."""
        rows = self.con.execute(
            "SELECT DISTINCT a.target FROM anchors a JOIN notes n ON n.id = a.note_id "
            "WHERE n.status = 'active' AND a.kind = 'variable' "
            "AND coalesce(json_extract_string(a.fingerprint, '$.scope'), '') = ? "
            "ORDER BY a.target", [scope]).fetchall()
        return [r[0] for r in rows]

    # -- whole tables (the exchange format) ------------------------------------------------

    def tables(self) -> dict[str, dict[str, str]]:
        """Every table with its columns and their types, in schema order."""
        rows = self.con.execute(
            "SELECT table_name, column_name, data_type FROM information_schema.columns "
            "WHERE table_schema = 'main' ORDER BY table_name, ordinal_position").fetchall()
        tables: dict[str, dict[str, str]] = {}
        for table, column, kind in rows:
            tables.setdefault(table, {})[column] = kind
        return tables

    def row_count(self, table: str) -> int:
        return self.con.execute(f"SELECT count(*) FROM {table}").fetchone()[0]

    def table_rows(self, table: str, columns: Sequence[str]) -> Iterator[list[tuple]]:
        """All of ``table``'s rows, ``columns`` in that order, in batches of 1,000, sorted
        by the first two columns (so exports are deterministic)."""
        cursor = self.con.execute(f"SELECT {', '.join(columns)} FROM {table} "
                                  f"ORDER BY {', '.join(columns[:2])}")
        while batch := cursor.fetchmany(1000):
            yield batch

    def note_uids(self) -> dict[str, int]:
        return dict(self.con.execute("SELECT uid, id FROM notes").fetchall())

    def uids_of(self, note_ids: Sequence[int]) -> dict[int, str]:
        """The uids of ``note_ids`` (a lookup, not a scan of every note)."""
        if not note_ids:
            return {}
        return dict(self.con.execute(
            f"SELECT id, uid FROM notes WHERE id IN ({_id_list(note_ids)})").fetchall())

    def versions(self, note_id: int) -> list[Note]:
        """Every version of a note, oldest first (``version``, its text and fields, and
        ``updated_at``: when it was written); status is the note's now. None of a purged
        note (their text is erased)."""
        rows = self.con.execute(
            "SELECT v.note_id, v.text, v.kind, v.priority, v.tags, n.status, v.version, "
            "n.created_at, v.created_at, v.author, v.provenance, n.supersedes, NULL, NULL "
            "FROM note_versions v JOIN notes n ON n.id = v.note_id WHERE v.note_id = ? "
            "AND n.status <> 'purged' ORDER BY v.version", [note_id]).fetchall()
        return [_note(r) for r in rows]

    def request_result(self, request_id: str) -> dict[str, Any] | None:
        """What a bulk request (import, reembed, reindex) answered, kept in ``meta`` so a
        resent one gets the same answer; meta is not exported."""
        value = self.meta(f"request:{request_id}")
        return json.loads(value) if value else None

    def record_request(self, request_id: str, result: dict[str, Any]) -> None:
        self._set_meta(f"request:{request_id}", json.dumps(result))

    def set_event_data(self, seq: int, data: dict) -> None:
        """Rewrite one event's data (an import pointing a link at this store's note ids)."""
        self.con.execute("UPDATE events SET data = ? WHERE seq = ?", [json.dumps(data), seq])

    def set_supersedes(self, note_id: int, old: int) -> None:
        self.con.execute("UPDATE notes SET supersedes = ? WHERE id = ?", [old, note_id])
