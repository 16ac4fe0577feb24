"""What a hit shows of each note (its row, as a line of JSON), in compressed blocks kept
in memory and in a file: recall reads its hits here instead of asking DuckDB.

DuckDB reads rows by scanning, whatever the filter. Measured at 100k notes (DuckDB 2.0,
which plans no index scan for these): ten hits by ``id IN (...)`` 2.7 ms, by ``rowid IN``
20 ms, one statement per id 16 ms, and the scan grows with the store. Here ``BLOCK``
consecutive ids share a block, its lines compressed with zlib. A hit costs its block's
decompression: on the bench corpus's 26 MB of rows (bench_scale at 100k, 2,000 random
notes) blocks of 4, 8 and 16 took 10.2, 8.7 and 7.9 MB and 6, 10 and 16 us a hit; 8 saves a
recall of ten hits about 0.07 ms for 0.9 MB a 100k notes. A change to a note marks its
block out of date until the block is written again (engine/indexes.py: by the first
recall that needs it). A file of another block size is built again on open.
"""

from __future__ import annotations

import zlib
from pathlib import Path
from typing import Iterable, Sequence

import numpy as np

from .arrays import ArraysFileError, read_arrays, write_arrays

BLOCK = 8
_MAGIC = b"NBMCARDS1\n"


class CardsFileError(Exception):
    """The file is missing, damaged or not one of ours (the cards are built again)."""


class Cards:
    """Lines by note id: blocks from the file, blocks written since, and out-of-date ones."""

    def __init__(self, offsets: np.ndarray | None = None, blob: bytes | np.ndarray = b""):
        self._offsets = np.zeros(1, np.int64) if offsets is None else offsets
        self._blob = memoryview(blob).cast("B") if len(blob) else memoryview(b"")
        self._written: dict[int, bytes] = {}  # block: compressed lines, since the file
        self.out_of_date: set[int] = set()  # blocks whose notes changed since written

    def mark(self, note_ids: Iterable[int]) -> None:
        """The notes changed: their lines are out of date."""
        self.out_of_date.update(int(i) // BLOCK for i in note_ids)

    def lines(self, ids: Sequence[int]) -> tuple[dict[int, bytes], list[int]]:
        """The line of each note in ``ids`` that the cards hold up to date, and the ids
        they do not (to be read from the store)."""
        found: dict[int, bytes] = {}
        missing: list[int] = []
        blocks: dict[int, list[bytes] | None] = {}
        for note_id in ids:
            block = int(note_id) // BLOCK
            if block not in blocks:
                blocks[block] = self._lines_of(block)
            prefix = b"[%d," % note_id
            line = next((x for x in blocks[block] or () if x.startswith(prefix)), None)
            if line is None:
                missing.append(note_id)
            else:
                found[note_id] = line
        return found, missing

    def _lines_of(self, block: int) -> list[bytes] | None:
        data = None if block in self.out_of_date else self._compressed(block)
        return zlib.decompress(data).split(b"\n") if data else None

    def _compressed(self, block: int):
        """The block's compressed lines, written since or from the file (empty: none)."""
        data = self._written.get(block)
        if data is None and block + 1 < len(self._offsets):
            data = self._blob[int(self._offsets[block]):int(self._offsets[block + 1])]
        return data or b""

    def write(self, ids: np.ndarray, lines: Sequence[str], blocks: Iterable[int]) -> None:
        """Rewrite ``blocks`` with the notes in them now: ``ids`` (ascending) and their
        ``lines``, as the store read them for those blocks."""
        ids = np.asarray(ids, np.int64)
        of = ids // BLOCK
        cuts = np.flatnonzero(np.diff(of)) + 1
        starts = np.concatenate([[0], cuts]).tolist()
        stops = np.concatenate([cuts, [len(ids)]]).tolist()
        given = set()
        for start, stop in zip(starts, stops):
            if start == stop:
                continue
            block = int(of[start])
            self._written[block] = zlib.compress("\n".join(lines[start:stop]).encode(), 6)
            given.add(block)
        for block in blocks:
            if block not in given:  # no notes there any more
                self._written[block] = b""
            self.out_of_date.discard(block)

    def every_line(self) -> Iterable[bytes]:
        """Every line the cards hold, out of date or not (what the file holds, for tests)."""
        count = max([len(self._offsets) - 1, *(b + 1 for b in self._written)])
        for block in range(count):
            data = self._compressed(block)
            if data:
                yield from zlib.decompress(data).split(b"\n")

    def arrays(self) -> dict[str, np.ndarray]:
        """Every block in one blob (out-of-date blocks empty), for the file."""
        count = max([len(self._offsets) - 1, *(b + 1 for b in self._written),
                     *(b + 1 for b in self.out_of_date)])
        pieces, sizes = [], np.zeros(count, np.int64)
        for block in range(count):
            data = None if block in self.out_of_date else self._compressed(block)
            if data:
                pieces.append(data)
                sizes[block] = len(data)
        offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
        return {"offsets": offsets, "blob": np.frombuffer(b"".join(pieces), np.uint8)}

    def save(self, path: Path, meta: dict) -> None:
        arrays = self.arrays()
        write_arrays(path, _MAGIC, meta, arrays)
        self._offsets, self._blob = arrays["offsets"], memoryview(arrays["blob"]).cast("B")
        self._written = {}

    @classmethod
    def load(cls, path: Path) -> tuple[Cards, dict]:
        try:
            meta, arrays = read_arrays(path, _MAGIC, "cards")
            if meta.get("block") != BLOCK:
                raise CardsFileError(f"blocks of {meta.get('block')}, this version uses {BLOCK}")
            return cls(arrays["offsets"].astype(np.int64), arrays["blob"]), meta
        except (ArraysFileError, KeyError, ValueError) as exc:
            raise CardsFileError(f"{path}: {exc}") from None
