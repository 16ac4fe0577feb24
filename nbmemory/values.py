"""Fingerprints of kernel values, for ``variable`` anchors: type, columns, dtypes, shape and
a hash of the content of small values. Taken in the kernel by the magics: pandas and polars
are recognised by their module, never imported here unless the value is theirs."""

from __future__ import annotations

import hashlib
from typing import Any

SMALL_FRAME_ROWS = 10_000  # polars frames up to this many rows get a content hash
# pandas: a frame of up to FULL_HASH_CELLS values is hashed whole; a larger one by rows
# spread evenly over it (about SAMPLE_CELLS values): a 10k x 100 frame of strings took
# 0.9 s a cell touching it, and frames over 10k rows were compared by shape alone.
FULL_HASH_CELLS = 100_000
SAMPLE_CELLS = 10_000
ROWS_SAMPLE_SCHEME = "rows-1"
def _module(value: Any) -> str:
    return type(value).__module__.split(".", 1)[0]


def _short_hash(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:32]


# polars documents DataFrame.hash_rows and Series.hash as unstable across polars versions:
# samples hash the column values written out canonically instead (see polars_sample).
POLARS_SAMPLE_SCHEME = "polars-values-1"
# Columns written as their physical numbers (numpy bytes of a fixed dtype) plus a null mask.
POLARS_NUMBERS = {"Int8", "Int16", "Int32", "Int64", "UInt8", "UInt16", "UInt32", "UInt64",
                  "Float32", "Float64", "Boolean", "Date", "Datetime", "Duration", "Time"}


def _polars_column(series) -> bytes:
    """One polars column's values, written the same way by every polars version.

    Numbers, booleans and temporal values: their physical values (days, or ticks of the
    column's time unit, as Arrow defines them) as numpy bytes, then the null mask.
    Categoricals as their strings (their codes depend on the string cache). Anything else
    (strings, decimals, lists, structs, binary, objects): ``repr`` of the Python values.
    """
    dtype_name = series.dtype.base_type().__name__
    if dtype_name in ("Categorical", "Enum"):
        series = series.cast(str)
    elif dtype_name in POLARS_NUMBERS:
        physical = series.to_physical()
        values = physical.fill_null(False if dtype_name == "Boolean" else 0).to_numpy()
        nulls = physical.is_null().to_numpy()
        return b"n" + values.dtype.str.encode() + b"|" + values.tobytes() + nulls.tobytes()
    return b"p" + repr(series.to_list()).encode()


def polars_sample(columns) -> str:
    """A hash of polars columns (names and values), stable across polars versions."""
    digest = hashlib.sha256()
    for series in columns:
        for part in (str(series.name).encode(), _polars_column(series)):
            digest.update(len(part).to_bytes(8, "little") + part)
    return digest.hexdigest()[:32]


def _rows(value, out: dict[str, Any]):
    """A pandas frame or series to hash: whole, or rows spread evenly over it (first and
    last included; ``out`` then names the scheme)."""
    rows, width = len(value), (value.shape[1] if value.ndim == 2 else 1) or 1
    if rows * width <= FULL_HASH_CELLS:
        return value
    out["sample_scheme"] = ROWS_SAMPLE_SCHEME
    step = -(-rows // max(2, SAMPLE_CELLS // width))  # rounded up
    positions = [*range(0, rows, step)]
    return value.iloc[positions + [rows - 1] if positions[-1] != rows - 1 else positions]


def _pandas_hashes(pd, value, **options):
    """pandas' row hashes; a set is hashed as its sorted members (its repr's order follows
    the string hash seed, new in every kernel), a column of lists or dicts (unhashable) as
    their reprs."""
    frame = value.to_frame() if value.ndim == 1 else value
    for at in [i for i, t in enumerate(frame.dtypes) if t == object]:
        column = frame.iloc[:, at]
        if column.map(lambda item: isinstance(item, (set, frozenset))).any():
            frame = frame.copy() if frame is value else frame
            frame.isetitem(at, column.map(_set_sorted))
    value = frame.iloc[:, 0] if value.ndim == 1 else frame
    try:
        return pd.util.hash_pandas_object(value, **options).to_numpy()
    except TypeError:
        return pd.util.hash_pandas_object(value.map(repr), **options).to_numpy()


def _set_sorted(item: Any) -> Any:
    if isinstance(item, (set, frozenset)):
        return f"{type(item).__name__}{sorted(map(repr, item))}"
    return item


# Lists, tuples, dicts and sets are hashed by their content, item by item (see _digest):
# their repr held objects' memory addresses (a false alarm at every run) and shortened
# the frames inside them (a change missed).
VALUES_SAMPLE_SCHEME = "values-1"
MAX_DIGESTED_ITEMS = 20_000
MAX_DIGESTED_BYTES = 8 * 2**20
_SCALARS = (str, bytes, int, float, bool, complex, type(None))


def _digest(value: Any, digest, budget: list[int]) -> bool:
    """Feed ``value``'s content into ``digest``: scalars by repr, containers item by item
    (dict items and set members in a fixed order), frames and arrays by their own sample,
    other objects by repr unless it is the default one (an address: by type alone). False
    when a frame inside is too big to hash or the value exceeds ``budget`` (items, bytes)."""
    budget[0] -= 1
    if budget[0] < 0:
        return False
    if isinstance(value, _SCALARS):
        part = f"{type(value).__name__}:{value!r}".encode()
    elif isinstance(value, (list, tuple)):
        digest.update(f"{type(value).__name__}[{len(value)}".encode())
        return all(_digest(item, digest, budget) for item in value)
    elif isinstance(value, (dict, set, frozenset)):
        pairs = value.items() if isinstance(value, dict) else ((item, None) for item in value)
        digest.update(f"{type(value).__name__}{{{len(value)}".encode())
        return all(_digest(key, digest, budget) and _digest(item, digest, budget)
                   for key, item in sorted(pairs, key=lambda pair: repr(pair[0])))
    elif _module(value) in ("pandas", "polars", "numpy"):
        inner = variable_fingerprint(value)
        if "sample" not in inner:
            return False
        part = repr(sorted(inner.items())).encode()
    elif type(value).__repr__ is object.__repr__:
        part = f"{_module(value)}.{type(value).__qualname__}".encode()
    else:
        part = repr(value).encode()
    budget[1] -= len(part)
    digest.update(len(part).to_bytes(8, "little") + part)
    return budget[1] >= 0


def variable_fingerprint(value: Any) -> dict[str, Any]:
    """Type, schema, shape and (for small values) a content hash of a kernel value.

    pandas and polars are recognised by their module, never imported here.
    """
    kind = type(value).__name__
    out: dict[str, Any] = {"type": f"{_module(value)}.{kind}"}
    module = _module(value)
    try:
        if module == "pandas" and kind == "DataFrame":
            import pandas as pd

            out["columns"] = [[str(c), str(t)] for c, t in value.dtypes.items()]
            out["shape"] = list(value.shape)
            part = _rows(value, out)
            hashed = _pandas_hashes(pd, part, index=True)
            out["sample"] = _short_hash(hashed.tobytes() + repr(list(value.columns)).encode())
        elif module == "pandas" and kind == "Series":
            import pandas as pd

            out["columns"] = [[str(value.name), str(value.dtype)]]
            out["shape"] = list(value.shape)
            out["sample"] = _short_hash(_pandas_hashes(pd, _rows(value, out)).tobytes())
        elif module == "polars" and kind in ("DataFrame", "LazyFrame"):
            schema = value.collect_schema() if kind == "LazyFrame" else value.schema
            out["columns"] = [[str(c), str(t)] for c, t in schema.items()]
            if kind == "DataFrame":
                out["shape"] = list(value.shape)
                if value.height <= SMALL_FRAME_ROWS:
                    out["sample"] = polars_sample(value.get_columns())
                    out["sample_scheme"] = POLARS_SAMPLE_SCHEME
        elif module == "polars" and kind == "Series":
            out["columns"] = [[str(value.name), str(value.dtype)]]
            out["shape"] = [len(value)]
            if len(value) <= SMALL_FRAME_ROWS:
                out["sample"] = polars_sample([value])
                out["sample_scheme"] = POLARS_SAMPLE_SCHEME
        elif module == "numpy" and kind == "ndarray":
            out["columns"] = [["", str(value.dtype)]]
            out["shape"] = list(value.shape)
            if value.dtype == object:  # its bytes are the addresses of its items
                digest = hashlib.sha256()
                if _digest(value.tolist(), digest, [MAX_DIGESTED_ITEMS, MAX_DIGESTED_BYTES]):
                    out["sample"] = digest.hexdigest()[:32]
                    out["sample_scheme"] = VALUES_SAMPLE_SCHEME
            elif value.nbytes <= 8 * 2**20:
                out["sample"] = _short_hash(value.tobytes())
        elif isinstance(value, (str, bytes, int, float, bool, complex, type(None))):
            out["sample"] = _short_hash(repr(value).encode())
        elif isinstance(value, (list, tuple, dict, set, frozenset)):
            out["shape"] = [len(value)]
            digest = hashlib.sha256()
            if _digest(value, digest, [MAX_DIGESTED_ITEMS, MAX_DIGESTED_BYTES]):
                out["sample"] = digest.hexdigest()[:32]
                out["sample_scheme"] = VALUES_SAMPLE_SCHEME
        elif hasattr(value, "__len__"):
            out["shape"] = [len(value)]
    except Exception as exc:  # an odd object: keep what we have, say why
        out["partial"] = f"{type(exc).__name__}: {exc}"[:200]
    return out


def describe_variable(fingerprint: dict[str, Any]) -> str:
    """``DataFrame 1000×5`` for messages."""
    kind = fingerprint.get("type", "").rsplit(".", 1)[-1]
    shape = fingerprint.get("shape")
    return f"{kind} {'×'.join(map(str, shape))}" if shape else kind
