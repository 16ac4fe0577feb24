"""Progress bars for long work (re-embedding, import, export, reindex).

The engine reports ``progress(done, total)``; a long operation may run in phases with
different totals (rows restored, texts embedded, vectors indexed), each shown as its
own fill of the same bar.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Callable, Iterator


@contextmanager
def progress_bar(description: str, *, terminal: bool = False,
                 unit: str = "item") -> Iterator[Callable[[int, int], None]]:
    """A callback drawing a tqdm bar on first use: a widget in notebooks, or with
    ``terminal`` a text bar on stderr shown only when stderr is a terminal."""
    if terminal:
        import sys

        from tqdm import tqdm

        def make(total: int):
            return tqdm(total=total, desc=description, unit=unit, file=sys.stderr, disable=None)
    else:
        from tqdm.auto import tqdm

        def make(total: int):
            return tqdm(total=total, desc=description, unit=unit)

    bar = None

    def progress(done: int, total: int) -> None:
        nonlocal bar
        if bar is None:
            bar = make(total)
        elif total != bar.total:  # the next phase of the work
            bar.reset(total=total)
        bar.update(done - bar.n)

    try:
        yield progress
    finally:
        if bar is not None:
            bar.close()
