"""Upkeep of a whole store: export and import, Markdown pages, rebuilding the indexes
and re-embedding every note with another model."""

from __future__ import annotations

import os
import threading
from contextlib import nullcontext
from pathlib import Path
from typing import Any, Sequence

import duckdb
import numpy as np

from .. import exchange, markdown
from ..config import find_git_root
from ..embed import model_name
from ..errors import InvalidInput, NotFound, StoreUnavailable
from ..files import disk_full
from ..models import utcnow
from ..repos import identity
from ..store import Filters
from .part import Part, Progress
from .validate import default_author, no_note, note_id
from .writes import BULK_CHUNK


class Upkeep(Part):
    def __init__(self, engine):
        super().__init__(engine)
        # One re-embed at a time: a second, asked for while the first embeds with the
        # engine's lock free (the store still says the model differs), waits for it.
        self._reembedding = threading.Lock()

    def reembed(self, progress: Progress | None = None, *,
                request_id: str | None = None) -> dict[str, Any]:
        """Embed every note with the configured model and switch the store to it.

        Each chunk is embedded with the engine's lock free (a large store's re-embed held
        it for minutes: status, lists and the panel waited); recall and writes refuse the
        other model until the switch, as they did. Doing it again changes nothing; a
        repeated ``request_id`` returns the first answer (``embedded`` counts what that
        one embedded)."""
        with self._reembedding:
            with self.lock:
                if request_id and (done := self.store.request_result(request_id)) is not None:
                    return done
            embedded = self.embed_missing(progress, unlocked=True)
            return self._switch(embedded, request_id)

    def _switch(self, embedded: int, request_id: str | None) -> dict[str, Any]:
        """Switch the store to the configured model, its texts embedded (but those written
        meanwhile, embedded now)."""
        with self.lock:
            self._still_open(f"{embedded} texts were embedded and kept")
            embedded += self.embed_missing()
            previous = self.engine.stored_identity
            self.engine.set_identity(self.engine.embedder.identity)
            self.engine.open_indexes(None, rebuild=True)
            self.engine.index_state = "rebuilt (re-embedded)"
            result = {"from": previous, "to": self.engine.embedder.identity, "embedded": embedded}
            if request_id:
                self.store.record_request(request_id, result)
            return result

    def export_jsonl(self, path: str, *, progress: Progress | None = None,
                     ids: Sequence[int] | None = None) -> dict[str, int]:
        """Write the whole store, losslessly, to a JSON Lines file at ``path``; or only the
        notes ``ids`` (with their history and vectors), e.g. to share them."""
        target = Path(os.path.realpath(os.path.abspath(path)))
        if (target.parent == Path(os.path.realpath(self.engine.directory))
                and target.suffix != ".jsonl"):
            # Renamed over memory.duckdb or its log, it drops every write since (and after);
            # none of the store's own files ends in .jsonl.
            raise InvalidInput(f"Cannot export to {path}: the store keeps its database and "
                               f"indexes in that directory ({self.engine.directory}), and an "
                               "export there must not take one's place. Name it *.jsonl, or "
                               "give a path outside it.")
        if ids is not None:
            ids = [note_id(i) for i in ids]
            if not ids:
                raise InvalidInput("Give the ids of the notes to export.")
            with self.lock:
                missing = sorted(set(ids) - set(self.store.get_notes(ids)))
            if missing:
                raise NotFound(f"{no_note(missing[0])} Nothing was exported.")
        # Shared from a store in a git checkout: its paths say which repository they are in,
        # as a team store's do (each member then checks their own checkout).
        workspace = self.engine.workspace
        repo = (identity(workspace) if ids is not None and not self.store.shared
                and find_git_root(workspace) == workspace else None)
        with self.lock:
            return exchange.export_jsonl(self.store, path, model=self.engine.stored_identity,
                                         progress=progress, ids=ids, repo=repo)

    def import_jsonl(self, path: str, *, on_conflict: str = "skip", actor: str | None = None,
                     progress: Progress | None = None,
                     request_id: str | None = None, merge: bool = False) -> dict[str, int]:
        """Import an export. Into an empty store it restores exactly (unless ``merge``);
        otherwise notes are matched by uid and ``on_conflict`` (skip, replace, keep-both)
        says what wins.

        A repeated ``request_id`` returns the first import's summary (the summary commits
        with the import) after embedding whatever that one had not embedded yet."""
        if on_conflict not in exchange.POLICIES:
            raise InvalidInput(f"Unknown conflict policy {on_conflict!r}; use one of: "
                               f"{', '.join(exchange.POLICIES)}")
        with self.lock:
            if (done := self._import_done(request_id, progress)) is not None:
                return done
        export = exchange.read_export(path)  # outside the lock: reads and checks the file
        if self.store.shared:
            _refuse_nul(export)
        here = self._identity(export)
        export.keep_vectors(self.engine.embedder.name,
                            int(here.rsplit(":", 1)[1]) if here else None)
        ahead = self._embed_ahead(export, progress)
        with self.lock:
            if (done := self._import_done(request_id, progress)) is not None:
                return done
            self.engine.check_embedder()
            before = self.store.position()
            empty = before == 0 and not merge
            try:
                with self.engine.writing() as entry:
                    if empty:
                        summary = exchange.restore(self.store, export, progress)
                        summary = {"restored": summary.get("notes", 0),
                                   "snapshots": summary.get("snapshots", 0)}
                    else:
                        summary = exchange.merge(self.store, export, policy=on_conflict,
                                                 actor=default_author(actor), now=utcnow(),
                                                 journal=entry)
                    # Its vectors came with the rows (those of another length were left out).
                    if export.header.get("model") == here and (
                            empty or not self.engine.stored_identity):
                        self.engine.set_identity(here)
                    summary["embedding"] = self._put_ahead(ahead)
                    name = self.engine.embedder.name
                    if not self.engine.stored_identity and (dims := export.dims(name)):
                        # A file made after a switch to another model, which also brings this
                        # one's vectors: nothing to embed, and no identity else (no index).
                        self.engine.set_identity(f"{name}:{dims}")
                    if request_id:
                        self.store.record_request(request_id, summary)
            except (duckdb.Error, KeyError, TypeError, ValueError,
                    *getattr(self.store, "data_errors", ())) as exc:
                if disk_full(exc):  # the file is not to blame: said as a full disk
                    raise
                # A well-framed file with a row the schema refuses (edited by hand, or
                # damaged inside a line): the transaction rolled back every row.
                raise InvalidInput(
                    f"{path} has a row this store cannot take ({type(exc).__name__}: "
                    f"{(str(exc).splitlines() or [''])[0]}). "
                    "The file is damaged or was edited by hand; export it again. "
                    "Nothing was imported.") from exc
            return self._embed_imported(summary, request_id, progress,
                                        since=None if empty else before)

    def _identity(self, export: exchange.Export) -> str | None:
        """``name:dims`` of the vectors this store keeps for its configured model, as the
        store says, else the model if loaded, else the file if made with a model of that
        name: a restore whose file brings every vector needs no model. None: unknown."""
        stored, name = self.engine.stored_identity, self.engine.embedder.name
        if stored and model_name(stored) == name:
            return stored
        if getattr(self.engine.embedder, "loaded", True):
            return f"{name}:{self.engine.embedder.dims}"
        made_with = export.header.get("model")
        return made_with if isinstance(made_with, str) and model_name(made_with) == name else None

    def _embed_ahead(self, export: exchange.Export,
                     progress: Progress | None) -> dict[str, np.ndarray]:
        """Vectors for this store's model of the texts ``export`` brings without one,
        made before the import takes the engine's lock: recalls and writes go on meanwhile
        (a recall waits for the model one chunk at most). They commit with the import."""
        model = self.engine.embedder.name
        purged = {row.get("id") for row in export.table("notes") if row.get("status") == "purged"}
        brought = {row["content_hash"]: row["text"] for row in export.table("note_versions")
                   if row.get("note_id") not in purged and isinstance(row.get("text"), str)
                   and isinstance(row.get("content_hash"), str)}
        for row in export.table("embeddings"):
            if row.get("model") == model:
                brought.pop(row.get("content_hash"), None)
        with self.lock:
            self.engine.check_embedder()
            here = self.store.embedded(model, list(brought))
        todo = sorted((h, t) for h, t in brought.items() if h not in here)
        ahead: dict[str, np.ndarray] = {}
        for start in range(0, len(todo), BULK_CHUNK):
            chunk = todo[start:start + BULK_CHUNK]
            ahead.update(zip([h for h, _ in chunk],
                             self.engine.embedder.encode([t for _, t in chunk])))
            if progress:
                progress(len(ahead), len(todo))
        return ahead

    def _put_ahead(self, ahead: dict[str, np.ndarray]) -> int:
        """Store the vectors made ahead of the texts the import kept (not those of a note
        skipped or purged here); how many."""
        model = self.engine.embedder.name
        kept = [(h, ahead[h]) for h, _ in self.store.texts_missing_embedding(model) if h in ahead]
        self.store.put_embeddings(model, kept)
        if kept and not self.engine.stored_identity:
            self.engine.set_identity(f"{model}:{len(kept[0][1])}")
        return len(kept)

    def _import_done(self, request_id: str | None,
                     progress: Progress | None) -> dict[str, int] | None:
        """The summary of an import ``request_id`` already committed, or None."""
        done = self.store.request_result(request_id) if request_id else None
        if done is not None and "embedded" not in done:  # it stopped before embedding
            done = self._embed_imported(done, request_id, progress)
        return done

    def _embed_imported(self, summary: dict, request_id: str | None,
                        progress: Progress | None, since: int | None = None) -> dict[str, int]:
        """Embed what an import brought without vectors, then bring the indexes up to date:
        the notes changed ``since`` a journal position if given and they are not many,
        else all of them rebuilt (a large vector index answers while it builds). The
        count so far commits with each chunk, so an import resumed after a crash says how
        many texts it embedded in all, not only after the crash."""
        before = summary.pop("embedding", 0)

        def counted(n: int) -> None:
            if request_id:
                self.store.record_request(request_id, {**summary, "embedding": before + n})

        embedded = before + self.embed_missing(progress, on_chunk=counted)
        changed = self.store.changed_since(since) if since is not None else None
        if changed is not None and len(changed) <= max(1_000, len(self.engine.state.priority) // 4):
            self.engine.resync(changed)
        else:
            self.engine.open_indexes(progress, rebuild=True)
        result = {**summary, "embedded": embedded}
        if request_id:
            self.store.record_request(request_id, result)
        return result

    def embed_missing(self, progress: Progress | None = None, *, on_chunk=None,
                      unlocked: bool = False) -> int:
        """Embed every kept text that has no vector for the configured model (vectors are
        data derived from texts: no event). ``on_chunk(done)`` runs in each chunk's
        transaction. ``unlocked``: called without the engine's lock, which is then taken
        only to read the texts and to write each chunk's vectors."""
        hold = self.lock if unlocked else nullcontext()
        name = self.engine.embedder.name
        with hold:
            todo = self.store.texts_missing_embedding(name)
        for start in range(0, len(todo), BULK_CHUNK):
            chunk = todo[start:start + BULK_CHUNK]
            vectors = self.engine.embedder.encode([t for _, t in chunk])
            with hold:
                self._still_open(f"{start} of {len(todo)} texts were embedded and kept")
                pairs = [(h, v) for (h, _), v in zip(chunk, vectors)]
                if unlocked:  # a note purged meanwhile must not get a vector back
                    kept = self.store.kept_hashes([h for h, _ in pairs])
                    pairs = [(h, v) for h, v in pairs if h in kept]
                with self.store.transaction():
                    self.store.put_embeddings(name, pairs)
                    if on_chunk:
                        on_chunk(start + len(chunk))
            if progress:
                progress(min(start + BULK_CHUNK, len(todo)), len(todo))
        with hold:
            self._still_open(f"all {len(todo)} texts were embedded and kept")
            if todo and not self.engine.stored_identity:
                self.engine.set_identity(f"{name}:{len(vectors[0])}")
        return len(todo)

    def _still_open(self, done: str) -> None:
        """StoreUnavailable once the store was closed while texts were embedded with the
        engine's lock free (the caller holds it now)."""
        if not self.engine.is_open:
            raise StoreUnavailable(f"The store was closed while its notes were embedded: "
                                   f"{done}; run it again to finish.")

    def export_markdown(self, directory: str, *, by: str = "tag") -> list[str]:
        """Readable Markdown pages of the active notes, one per tag (or kind)."""
        with self.lock:
            notes = self.engine.staleness.with_stale(self.store.list_notes(Filters(), limit=2**62)[0])
            return [str(p) for p in markdown.export_markdown(notes, directory, by=by)]

    def reindex(self, progress: Progress | None = None, *,
                request_id: str | None = None) -> dict[str, Any]:
        """Rebuild both indexes from DuckDB; re-embed first if the configured model changed.

        A repeated ``request_id`` returns the first answer without rebuilding again."""
        with self.lock:
            if request_id and (done := self.store.request_result(request_id)) is not None:
                return done
            mismatch = self.engine.mismatch
        if mismatch:  # embedded with the lock free, as reembed is
            result = {"action": "reembedded", **self.reembed(progress)}
        with self.lock:
            if not mismatch:
                self.engine.open_indexes(progress, rebuild=True)
                self.engine.index_state = "rebuilt (reindex)"
                result = {"action": "rebuilt", "model": self.engine.stored_identity,
                          "vectors": len(self.engine.vectors) if self.engine.vectors is not None else 0,
                          "lexical_docs": len(self.engine.keywords.index)}
            if request_id:
                self.store.record_request(request_id, result)
            return result


def _holds_nul(value: Any) -> bool:
    """A NUL anywhere in a row's value: a text's, or escaped in a JSON column's text."""
    if isinstance(value, str):
        return "\x00" in value or "\\u0000" in value
    if isinstance(value, dict):
        value = list(value.values())
    return isinstance(value, (list, tuple)) and any(_holds_nul(v) for v in value)


def _refuse_nul(export) -> None:
    """An export from a store written before NUL was refused may hold one, which
    PostgreSQL's text cannot: refused naming the note (not the file: a share's is a
    temporary one), rather than changing what was written."""
    latest = {row.get("id"): row.get("version") for row in export.table("notes")}
    for table in export.rows:
        for row in export.table(table):
            column = next((c for c, v in row.items() if _holds_nul(v)), None)
            if column is None:
                continue
            if table == "snapshots":
                raise InvalidInput(
                    f"Snapshot {row.get('name')!r} holds a NUL character (U+0000) in its "
                    f"{column}, which a team store cannot keep. Nothing was imported.")
            note = row.get("id" if table == "notes" else "note_id")
            old = table == "note_versions" and row.get("version") != latest.get(note)
            where = (f"version {row.get('version')} of its text" if old else
                     "its text" if column == "text" else
                     "its history" if table == "events" else
                     "what it is about" if table == "anchors" else f"its {column}")
            fix = ("an old version cannot be edited, so remember the finding anew there and "
                   "share the new note" if old else
                   f"edit the note there to remove it (nbmemory edit {note}), then share or "
                   "export it again" if column == "text" else
                   "remove it in that store, then share or export it again")
            raise InvalidInput(
                f"Note #{note} of the store it comes from holds a NUL character (U+0000) in "
                f"{where}, which a team store cannot keep. Nothing was imported: {fix}.")
