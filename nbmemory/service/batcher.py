"""Concurrent remembers, collected into one embedding call and one transaction.

A batch waits up to :data:`LINGER` seconds for clients that sent remembers lately (each
has at most one in flight) and are probably about to send the next: 4 writers then share
one embedding call and one transaction instead of alternating batches of 1 and 3.
"""

from __future__ import annotations

import queue
import threading
import time
from concurrent.futures import Future
from typing import Any

MAX_BATCH = 64
LINGER = 0.005
RECENT = 0.5


class RememberBatcher:
    """Collects concurrent remembers and writes them with :meth:`Engine.remember_batch`."""

    def __init__(self, engine):
        self.engine = engine
        self._queue: queue.SimpleQueue = queue.SimpleQueue()
        self.batches = 0
        self.remembered = 0
        self.busy = 0.0  # seconds spent in remember_batch
        self._thread = threading.Thread(target=self._run, name="nbmemory-remember", daemon=True)
        self._thread.start()

    def submit(self, arguments: dict[str, Any], client: Any = None):
        """Remember through the next batch; ``client`` identifies the sender's connection."""
        future: Future = Future()
        self._queue.put((arguments, future, client))
        return future.result()

    def stop(self, timeout: float) -> bool:
        """Let the batch being written finish (up to ``timeout`` s); True if it did."""
        self._queue.put(None)
        self._thread.join(timeout=timeout)
        return not self._thread.is_alive()

    def _run(self) -> None:
        recent: dict[Any, float] = {}
        while True:
            item = self._queue.get()
            if item is None:
                return
            start = time.monotonic()
            recent = {c: t for c, t in recent.items() if start - t < RECENT}
            recent[item[2]] = start
            expected, deadline = len(recent), start + LINGER
            batch = [item]
            while len(batch) < MAX_BATCH:
                wait = deadline - time.monotonic() if len(batch) < expected else 0
                try:
                    item = self._queue.get(timeout=wait) if wait > 0 else self._queue.get_nowait()
                except queue.Empty:
                    break
                if item is None:
                    self._queue.put(None)
                    break
                batch.append(item)
                recent[item[2]] = start
            self.batches += 1
            self.remembered += len(batch)
            began = time.perf_counter()
            try:
                results = self.engine.remember_batch([arguments for arguments, _, _ in batch])
            except BaseException as exc:  # noqa: BLE001 - handed to every waiting request
                results = [exc] * len(batch)
            self.busy += time.perf_counter() - began
            for (_, future, _), result in zip(batch, results):
                if isinstance(result, BaseException):
                    future.set_exception(result)
                else:
                    future.set_result(result)
