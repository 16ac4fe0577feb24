"""A team store's engine opened while its server is away: on this machine's copy.

An owner that starts while PostgreSQL cannot be reached (a laptop off the network once its
last owner exited) serves the copy the last owner kept (:mod:`.mirror`: notes, what they
are about, their vectors), with the indexes it saved, rather than fail. Recall, listings
and reading a note answer from it and say they may be behind; writes wait for the server,
as they do when it goes away under a running owner. The server is asked again, on a thread
of its own (a server that drops packets takes its connect timeout to say no), at most every
:data:`RETRY_S` seconds when a call comes, which waits up to :data:`PROBE_WAIT_S` for the
answer; once it has answered, that call (or the next) takes it as the engine's store and
catches up from the position the copy was made at.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

from ..address import linked_address
from ..errors import StoreUnavailable, StoreUnreachable
from ..store import DB_FILENAME, Filters, open_store
from .mirror import MIRROR_DIRNAME, WITH_VECTORS, Mirror

RETRY_S = 5.0
PROBE_WAIT_S = 2.0  # how long the call that asks again waits for the answer


class AwayStore:
    """The copy standing in for the team store: its rows as of the position it was copied
    at, read-only. Anything that would need the server raises :class:`StoreUnreachable`."""

    shared = True
    store_id = None  # not the copy's own: the indexes are the team store's

    def __init__(self, mirror: Mirror, directory: Path, why: str):
        self.mirror, self.why = mirror, why
        self.address = linked_address(directory)
        self.path, self.directory = self.address.url, None
        self.retry_at = time.monotonic() + RETRY_S
        self.probing = self.closed = False
        self.found = None  # the team store, once a probe reached it
        self._found = threading.Lock()

    def __getattr__(self, name: str):  # reads: the copy's own
        return getattr(self.mirror.store, name)

    def unreachable(self) -> StoreUnreachable:
        return StoreUnreachable(self.why)

    def position(self) -> int:
        return self.mirror.position

    def changed_since(self, seq: int) -> list[int]:
        """Nothing after the copy's position; before it (an index saved earlier), every
        note, as the copy does not say which changed: read again, they are the copy's."""
        if seq >= self.mirror.position:
            return []
        return self.mirror.store.note_ids(Filters(statuses=())).tolist()

    def transaction(self):
        raise self.unreachable()

    def listen(self, callback) -> None:
        """Nothing to hear while the server is away: :func:`reconnect` listens once it is back."""

    def close(self, *, checkpoint: bool = True) -> None:
        with self._found:  # the mirror closes its own store
            self.closed = True
            if self.found is not None:
                self.found.close()

    def take_found(self):
        with self._found:
            found, self.found = self.found, None
            return found

    def probe(self, directory: Path) -> None:
        try:
            store = open_store(directory)
            with self._found:
                if self.closed:  # the engine closed meanwhile
                    store.close()
                else:
                    self.found = store
        except StoreUnreachable as exc:
            self.why = str(exc)
        except Exception as exc:  # noqa: BLE001 - said at the next call
            self.why = f"{self.why} (trying it again: {exc})"
        finally:
            self.retry_at, self.probing = time.monotonic() + RETRY_S, False


def open_or_away(directory: Path):
    """The store ``directory`` stands for; for a team store whose server cannot be
    reached, this machine's copy of it if there is one."""
    try:
        return open_store(directory)
    except StoreUnreachable as exc:
        return open_away(directory, exc)


def open_away(directory: Path, why: StoreUnreachable) -> AwayStore:
    """The copy of the team store ``directory`` links to, or ``why`` raised again when
    there is none to serve (never mirrored, or mirrored before copies held vectors)."""
    none = StoreUnreachable(f"{why} This machine has no copy of its notes to read meanwhile "
                            "(one is kept from the first time nbmemory here reaches the server).")
    if not (Path(directory) / MIRROR_DIRNAME / DB_FILENAME).is_file():
        raise none
    mirror = Mirror(directory, None)
    if not mirror.position or not mirror.store.meta(WITH_VECTORS):
        mirror.close()
        raise none
    return AwayStore(mirror, directory, str(why))


def close_store(store) -> None:
    """Close what :func:`open_or_away` opened (an away store's copy too)."""
    store.close()
    if isinstance(store, AwayStore):
        store.mirror.close()


def reconnect(engine) -> None:
    """Once a probe has reached the server, make it the engine's store, to catch up from
    the copy's position; until then start one (at most every :data:`RETRY_S` seconds) and
    raise :class:`StoreUnreachable`. Call with the engine's lock held."""
    away = engine.store
    store = away.take_found()
    if store is None and not away.probing and time.monotonic() >= away.retry_at:
        away.probing = True
        probe = threading.Thread(target=away.probe, args=(engine.directory,),
                                 name="nbmemory-reconnect", daemon=True)
        probe.start()
        probe.join(PROBE_WAIT_S)  # a server back answers at once: this call reads from it
        store = away.take_found()
    if store is None:
        raise away.unreachable()
    if (position := store.position()) < away.mirror.position:  # restored from a backup
        store.close()
        raise StoreUnavailable(
            f"The team store {away.address.url} is back with fewer events (journal position "
            f"{position:,}) than this machine saw ({away.mirror.position:,}): it was "
            "restored from an older backup, and some notes are lost. Nothing was changed "
            "here; restart nbmemory (nbmemory stop) to see what the server has.")
    for holder in (engine, engine.journal, engine.keywords, engine.dense, engine.cards):
        holder.store = store
    engine.dense.close_reader()
    engine.mirror.primary = store
    engine.away = False
    store.listen(engine._woken)
