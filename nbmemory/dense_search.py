"""The dense channel's candidates for recall: the nearest notes that can be shown, searched
in the process's second thread while the keyword channel scores."""

from __future__ import annotations

import os
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Callable, Container

import numpy as np

from .vectors import VectorIndex

_second: tuple[int, ThreadPoolExecutor] | None = None  # (its process, the thread)
_second_lock = threading.Lock()


def beside(fn: Callable, *args, **kwargs) -> Future:
    """``fn(*args, **kwargs)`` run in the process's second thread while the caller goes on.

    Recall searches the dense channel there while it scores the keywords: usearch and
    numpy's products let go of the GIL, and the two take about as long as each other. At
    100k notes (bench_scale's corpus, 2 cores) the graph's search took 0.71 ms and work of
    the keyword channel's size 0.75; one after the other 1.61, side by side 0.85 (handing
    work to the thread and back: 0.08).
    """
    global _second
    with _second_lock:
        if _second is None or _second[0] != os.getpid():  # threads do not survive a fork
            _second = (os.getpid(), ThreadPoolExecutor(1, thread_name_prefix="nbmemory-recall"))
        return _second[1].submit(fn, *args, **kwargs)


def nearest(vectors: VectorIndex, qvec: np.ndarray, pool: int, exact: bool,
            drop: Container[int] = (), scored: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """Ids and cosines of the ``pool`` nearest vectors not in ``drop``, best first, with the
    dropped ones ranked among them (the shortest such prefix of the ranking). ``scored``
    False: the graph's candidates, at least ``pool`` not dropped, unordered (see
    :meth:`VectorIndex.search`).

    The search asks for ``pool`` and looks further only while dropped ids fill the gap:
    asking for ``pool`` plus every inactive note made a store with many superseded notes
    pay for all of them on every recall.
    """
    count, total = pool, len(vectors)
    while True:
        ids, sims = vectors.search(qvec, min(count, total), exact=exact, scored=scored)
        dropped = np.fromiter((i in drop for i in ids.tolist()), bool, len(ids)) if drop else None
        kept = len(ids) - (int(dropped.sum()) if dropped is not None else 0)
        if kept >= pool or count >= total:
            if dropped is not None and kept > pool and scored:
                end = int(np.searchsorted(np.cumsum(~dropped), pool)) + 1
                ids, sims = ids[:end], sims[:end]
            return ids, sims
        count = 2 * count + (len(ids) - kept)
