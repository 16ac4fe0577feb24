"""Named numpy arrays and a JSON header in one file, written atomically and read back whole.

The layout: a magic line, the header's length and the header (its ``meta``, where each
array starts and a CRC-32 of the arrays' bytes, checked on reading: a flipped bit must not
load as an index that fails later), then each array's bytes at an offset aligned to 64.
"""

from __future__ import annotations

import json
import struct
import zlib
from pathlib import Path

import numpy as np

from .files import atomic_write

_ALIGN = 64


class ArraysFileError(Exception):
    """The file is not one of ours, or is damaged."""


def write_arrays(path: Path, magic: bytes, meta: dict, arrays: dict[str, np.ndarray]) -> None:
    layout, offset = {}, 0
    for name, values in arrays.items():
        layout[name] = [values.dtype.str, len(values), offset]
        offset += -(-values.nbytes // _ALIGN) * _ALIGN
    crc = 0
    for values in arrays.values():
        crc = zlib.crc32(np.ascontiguousarray(values).data.cast("B"), crc)
    header = json.dumps({"meta": meta, "arrays": layout, "crc32": crc}).encode()

    def write(tmp: Path) -> None:
        with open(tmp, "wb") as out:
            out.write(magic + struct.pack("<Q", len(header)) + header)
            out.write(b"\0" * (-(out.tell()) % _ALIGN))
            base = out.tell()
            for name, values in arrays.items():
                out.seek(base + layout[name][2])
                out.write(np.ascontiguousarray(values).tobytes())
    atomic_write(path, write)


def read_arrays(path: Path, magic: bytes, kind: str) -> tuple[dict, dict[str, np.ndarray]]:
    """The ``meta`` and the arrays (read-only views of the file's bytes) of ``path``, a
    ``kind`` file (for the message when it is not)."""
    try:
        data = Path(path).read_bytes()
        if not data.startswith(magic):
            raise ArraysFileError(f"not a {kind} file")
        (size,) = struct.unpack_from("<Q", data, len(magic))
        start = len(magic) + 8
        header = json.loads(data[start:start + size])
        if not isinstance(header.get("meta"), dict) or not isinstance(header.get("arrays"), dict):
            raise ArraysFileError(f"not a {kind} file (a header of another shape)")
        base = start + size + (-(start + size) % _ALIGN)
        # An empty array may sit at the file's end, where numpy takes no offset.
        arrays = {name: np.frombuffer(data, np.dtype(dtype), count, base + at) if count
                  else np.empty(0, np.dtype(dtype))
                  for name, (dtype, count, at) in header["arrays"].items()}
        if "crc32" in header:  # files written before it had none: a flipped bit went unseen
            crc = 0
            for values in arrays.values():
                crc = zlib.crc32(values.data.cast("B"), crc)
            if crc != header["crc32"]:
                raise ArraysFileError("damaged (its checksum does not match)")
        return header["meta"], arrays
    except ArraysFileError:
        raise
    except (OSError, ValueError, KeyError, TypeError, AttributeError, struct.error) as exc:
        raise ArraysFileError(str(exc)) from exc
