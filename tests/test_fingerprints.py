"""polars DataFrame fingerprints that survive a polars upgrade.

polars documents ``DataFrame.hash_rows`` and ``Series.hash`` as unstable across versions,
so a note anchored to a frame would go stale on every upgrade. The fingerprint hashes the
column values written canonically instead; the pinned digests below are what any polars
version must give for these frames (a polars that changes them fails here, not in users'
notebooks).
"""

import datetime
import hashlib

import pytest

from nbmemory.values import POLARS_SAMPLE_SCHEME, variable_fingerprint
from nbmemory.memory import Memory
from nbmemory.models import Anchor

pl = pytest.importorskip("polars")


def orders():
    return pl.DataFrame({
        "id": [1, 2, None],
        "amount": [10.5, None, float("nan")],
        "name": ["a", None, "c"],
        "day": [datetime.date(2021, 3, 1), None, datetime.date(2020, 1, 1)],
        "ok": [True, False, None],
        "tags": [["x"], [], None],
        "cat": pl.Series(["u", "v", "u"], dtype=pl.Categorical),
        "at": [datetime.datetime(2021, 1, 1, 12), None, datetime.datetime(2021, 1, 2)],
        "st": [{"a": 1, "b": "x"}, None, {"a": 3, "b": None}],
    })


def test_the_sample_does_not_come_from_polars_hashing(monkeypatch):
    def unstable(*args, **kwargs):
        raise AssertionError("hash_rows/hash are not stable across polars versions")

    monkeypatch.setattr(pl.DataFrame, "hash_rows", unstable)
    monkeypatch.setattr(pl.Series, "hash", unstable)
    fingerprint = variable_fingerprint(orders())
    assert "partial" not in fingerprint
    assert fingerprint["sample_scheme"] == POLARS_SAMPLE_SCHEME == "polars-values-1"
    assert fingerprint["shape"] == [3, 9]


def test_the_sample_is_pinned_for_every_kind_of_column():
    assert variable_fingerprint(orders())["sample"] == "de5833a2a646a1d186807d5ac3ba5d37"
    assert variable_fingerprint(orders()["id"])["sample"] == "0fdb358f4781a30cee2221482df05cfc"


def test_the_sample_is_the_documented_serialisation():
    """Names and values, each length-prefixed: numbers as numpy bytes + null mask, the rest
    as the repr of the Python values."""
    frame = pl.DataFrame({"id": [1, 2], "name": ["a", "b"]})

    def part(data):
        return len(data).to_bytes(8, "little") + data

    import numpy as np

    numbers = np.array([1, 2], dtype="<i8").tobytes() + np.array([False, False]).tobytes()
    expected = hashlib.sha256(part(b"id") + part(b"n<i8|" + numbers)
                              + part(b"name") + part(b"p['a', 'b']")).hexdigest()[:32]
    assert variable_fingerprint(frame)["sample"] == expected


def test_the_same_values_give_the_same_sample_and_a_change_does_not():
    first = variable_fingerprint(orders())
    rebuilt = pl.concat([orders().head(1), orders().tail(2)])  # other chunks, same values
    assert variable_fingerprint(rebuilt)["sample"] == first["sample"]
    changed = orders().with_columns(pl.when(pl.col("name") == "c").then(pl.lit("C"))
                                    .otherwise(pl.col("name")).alias("name"))
    assert variable_fingerprint(changed)["sample"] != first["sample"]
    nan_to_null = orders().with_columns(pl.col("amount").fill_nan(None))
    assert variable_fingerprint(nan_to_null)["sample"] != first["sample"]  # NaN is not null
    renamed = orders().rename({"id": "order_id"})
    assert variable_fingerprint(renamed)["sample"] != first["sample"]


def test_a_note_about_a_polars_frame_stays_fresh_until_a_value_changes(store_dir):
    from nbmemory.embed import HashEmbedder

    scope = "orders.ipynb"
    with Memory.open(store_dir, embedder=HashEmbedder(), mode="local") as mem:
        anchor = Anchor("variable", "df", {**variable_fingerprint(orders()), "scope": scope})
        note = mem.remember("df amounts are in cents", about=[anchor])
        same = {"scope": scope, "values": {"df": variable_fingerprint(orders())}}
        assert mem.recall("df amounts", variables=same)[0].note.stale == ()
        edited = orders().with_columns(pl.col("amount").fill_null(99.0))
        now = {"scope": scope, "values": {"df": variable_fingerprint(edited)}}
        stale = mem.recall("df amounts", variables=now)[0].note.stale
        assert [(r.reason, r.target) for r in stale] == [("content_changed", "df")]
        assert mem.get(note.id).anchors[0].fingerprint["sample_scheme"] == "polars-values-1"


def test_an_equal_object_array_gives_the_same_sample_and_a_change_does_not():
    """An object array was hashed by its bytes, the addresses of its items: the same names
    read again flagged the note stale at every run."""
    import numpy as np

    def read(*last):  # the names as a new read makes them: new objects each time
        return np.array(["".join(["a", "da"]), "".join(last), float("1.5")], dtype=object)
    assert variable_fingerprint(read("b", "o")) == variable_fingerprint(read("b", "o"))
    assert variable_fingerprint(read("b", "o"))["sample"] != variable_fingerprint(
        read("c", "y"))["sample"]


def test_a_frame_of_sets_gives_the_same_sample_in_every_kernel():
    """A set's repr follows the string hash seed, new in every process: a frame holding
    sets was flagged stale after every kernel restart."""
    import subprocess
    import sys

    script = ("import pandas as pd; from nbmemory.values import variable_fingerprint as f; "
              "df = pd.DataFrame({'k': [1, 2], 'tags': [{'alpha', 'beta', 'gamma'}, "
              "frozenset({'delta', 'eps'})]}); s = pd.Series([{'x', 'y', 'z'}], name='t'); "
              "print(f(df)['sample'], f(s)['sample'])")
    samples = {subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                              env={**__import__("os").environ, "PYTHONHASHSEED": seed},
                              check=True).stdout for seed in ("1", "2", "3")}
    assert len(samples) == 1
