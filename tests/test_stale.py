"""Anchors and typed stale reasons with real files, a real git repository and real DuckDB."""

import json
import os
import subprocess
import time
from datetime import datetime, timezone

import duckdb
import nbformat
import pytest

import nbmemory.stale as stale_module
from nbmemory.display import diff_display, hits_text, stale_marker
from nbmemory.embed import HashEmbedder
from nbmemory.errors import InvalidInput
from nbmemory.memory import Memory
from nbmemory.models import Anchor, Provenance, StaleReason
from nbmemory.anchors import file_fingerprint, same_text
from nbmemory.provenance import source_hash
from nbmemory import store as store_module

ORDERS = "id,amount\n1,1000\n2,2500\n"
RESOLVER = "def resolve(name):\n    return lookup(name)  # retries forever when the lock is held\n"


def git(cwd, *args):
    return subprocess.run(["git", "-c", "user.email=t@example.com", "-c", "user.name=Test", *args],
                          cwd=cwd, check=True, capture_output=True, text=True).stdout.strip()


def save_later(path, text):
    """Write ``text`` as a save made a moment after the note (file clocks are coarse)."""
    path.write_text(text)
    later = time.time() + 2
    os.utime(path, (later, later))


@pytest.fixture
def ws(tmp_path):
    """A git repository with a CSV, a source file and a notebook, committed."""
    root = tmp_path / "repo"
    (root / "data").mkdir(parents=True)
    (root / "src").mkdir()
    (root / "data" / "orders.csv").write_text(ORDERS)
    (root / "src" / "resolver.py").write_text(RESOLVER)
    git(root, "init", "-q", "-b", "main")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "initial")
    return root


@pytest.fixture
def mem(ws):
    with Memory.open(ws / ".nbmemory", embedder=HashEmbedder()) as m:
        yield m


def reasons(note):
    return [(r.reason, r.target, r.detail) for r in note.stale]


def test_paths_in_text_are_anchored_relative_to_the_workspace_not_the_cwd(ws, mem, tmp_path,
                                                                          monkeypatch):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    note = mem.remember("src/resolver.py:2 retries forever when the lock is held; "
                        "src/ghost.py does not exist and orders.amount is a column")
    assert [(a.kind, a.target, a.origin) for a in note.anchors] == [("file", "src/resolver.py", "text")]
    assert note.stale == ()



def test_a_path_written_with_windows_separators_is_anchored(ws, mem):
    """On Windows people write data\\orders.csv; a regex's \\d or \\home is no path."""
    note = mem.remember("data\\orders.csv holds cents; the regex \\d+ and \\home are not paths")
    assert [(a.kind, a.target) for a in note.anchors] == [("data", "data/orders.csv")]
    from nbmemory.mentions import path_candidates

    assert path_candidates("\\\\srv\\share\\sales.parquet, ~\\data\\x.csv, ..\\up.csv") == [
        "//srv/share/sales.parquet", "~/data/x.csv", "../up.csv"]  # a share, home, the parent


def test_a_path_named_composed_finds_a_file_named_decomposed(ws, mem):
    """A folder copied from a Mac keeps é as e and an accent; the note is typed with é."""
    folder = ws / "donne\u0301es"
    folder.mkdir()
    (folder / "ventes.csv").write_text(ORDERS)
    note = mem.remember("donn\u00e9es/ventes.csv holds the amounts in cents")
    assert [(a.kind, a.target) for a in note.anchors] == [("data", "donne\u0301es/ventes.csv")]
    save_later(folder / "ventes.csv", ORDERS + "3,125\n")
    assert reasons(mem.get(note.id)) == [("rows_changed", "donne\u0301es/ventes.csv",
                                          "2 → 3 rows")]


def test_a_path_run_into_chinese_words_is_found_inside_them(ws, mem):
    """Chinese puts no spaces around a path: 文件数据/表.csv的金额 is one run of letters."""
    for name in ("数据/表.csv", "据/表.csv", "月次売上.csv", "売上.csv"):  # the longest wins
        (ws / name).parent.mkdir(exist_ok=True)
        (ws / name).write_text(ORDERS)
    note = mem.remember("文件数据/表.csv的金额单位是分，data/orders.csv中的也是。")
    assert [(a.kind, a.target) for a in note.anchors] == [("data", "数据/表.csv"),
                                                          ("data", "data/orders.csv")]
    note = mem.remember("月次売上.csv は税込")
    assert [a.target for a in note.anchors] == ["月次売上.csv"]


def test_a_path_with_spaces_written_without_quotes_is_anchored_whole(ws, mem):
    """Mac and Windows folders have spaces (Google Drive, C:\\Users\\Ada Lovelace); people
    do not quote them in prose. The part after the space is not anchored on its own."""
    for name in ("My Data/orders.csv", "Data/orders.csv", "Google Drive/sales.csv"):
        (ws / name).parent.mkdir(exist_ok=True)
        (ws / name).write_text(ORDERS)
    note = mem.remember(f"My Data/orders.csv holds cents, as does {ws}/Google Drive/sales.csv; "
                        "Data/orders.csv is a copy. Costs rose 3.5 times")
    assert [(a.kind, a.target) for a in note.anchors] == [
        ("data", "My Data/orders.csv"), ("data", "Google Drive/sales.csv"),
        ("data", "Data/orders.csv")]
    save_later(ws / "My Data" / "orders.csv", ORDERS + "3,125\n")
    assert reasons(mem.get(note.id)) == [("rows_changed", "My Data/orders.csv", "2 → 3 rows")]
    note = mem.remember("the new folder My Data\\orders.csv, written as on Windows")
    assert [a.target for a in note.anchors] == ["My Data/orders.csv"]


def test_paths_with_spaces_leave_look_ups_for_the_others_in_a_long_note(ws, mem):
    """Looking for paths with spaces took half the note's look-ups, and a path named after
    3,000 others in a long log was no longer found."""
    log = " ".join(f"step{i}/out{i}.csv" for i in range(3000))
    note = mem.remember(f"the run wrote {log}; data/orders.csv holds cents")
    assert [a.target for a in note.anchors] == ["data/orders.csv"]


def test_a_tilde_word_in_a_note_is_not_a_crash(ws, mem):
    note = mem.remember("~nosuchuser/orders.csv and ~/nowhere/x.csv are not files; "
                        "src/resolver.py is")
    assert mem.get(note.id).text.startswith("~nosuchuser/orders.csv")
    assert [a.target for a in note.anchors] == ["src/resolver.py"]

def test_edit_restore_rename_delete_a_file(ws, mem):
    path = ws / "src" / "resolver.py"
    note = mem.remember("src/resolver.py retries forever when the lock is held")

    path.write_text(RESOLVER + "# patched\n")
    assert reasons(mem.get(note.id)) == [("content_changed", "src/resolver.py", "")]
    assert stale_marker(mem.get(note.id)) == "[STALE: content_changed src/resolver.py]"

    path.write_text(RESOLVER)  # the edit undone: same content, new mtime
    assert mem.get(note.id).stale == ()

    path.rename(ws / "src" / "resolver_v2.py")
    assert reasons(mem.get(note.id)) == [("missing", "src/resolver.py",
                                          "renamed to src/resolver_v2.py?")]
    (ws / "src" / "resolver_v2.py").rename(path)
    assert mem.get(note.id).stale == ()

    path.unlink()
    assert reasons(mem.get(note.id)) == [("missing", "src/resolver.py", "")]
    git(ws, "checkout", "--", "src/resolver.py")
    assert mem.get(note.id).stale == ()


def test_the_same_text_with_windows_line_ends_is_not_a_change(ws, mem, monkeypatch):
    """A teammate's checkout on Windows (git's autocrlf) holds the file with CRLF line
    ends: the same text, so the note is not stale there, nor back on Linux."""
    monkeypatch.setattr("nbmemory.anchors.CHUNK", 7)  # a CR at a chunk's end too
    path = ws / "src" / "resolver.py"
    note = mem.remember("src/resolver.py retries forever when the lock is held")
    every = mem.remember("the sources retry forever", about=["src/*.py"])
    path.write_bytes(RESOLVER.replace("\n", "\r\n").encode())
    assert mem.get(note.id).stale == () and mem.get(every.id).stale == ()
    crlf = mem.remember("the resolver (src/resolver.py, as checked out on Windows) retries")
    path.write_text(RESOLVER)
    assert mem.get(note.id).stale == () and mem.get(crlf.id).stale == ()
    path.write_bytes((RESOLVER + "# patched\n").replace("\n", "\r\n").encode())
    assert reasons(mem.get(crlf.id)) == [("content_changed", "src/resolver.py", "")]
    assert reasons(mem.get(note.id)) == [("content_changed", "src/resolver.py", "")]
    # Taken before fingerprints held the text's hash: the same CRLF bytes are the same file.
    now = file_fingerprint(path)
    assert "text_sha256" in now and same_text(now, {"sha256": now["sha256"]})
    binary = ws / "data" / "blob.bin"
    binary.write_bytes(b"\0\1\r\n\2")
    blob = mem.remember("data/blob.bin is the model's weights")
    binary.write_bytes(b"\0\1\n\2")  # in a binary file that is a change
    assert reasons(mem.get(blob.id)) == [("content_changed", "data/blob.bin", "")]


def test_csv_rows_changed_shows_in_recall_and_clears_on_verify(ws, mem):
    csv = ws / "data" / "orders.csv"
    note = mem.remember("data/orders.csv amount is in cents before 2021")
    assert note.anchors[0].kind == "data"
    assert note.anchors[0].fingerprint["rows"] == 2
    assert note.anchors[0].fingerprint["columns"] == [["id", "BIGINT"], ["amount", "BIGINT"]]
    other = mem.remember("amount totals are rounded per order")

    csv.write_text(ORDERS + "3,4200\n")
    hits = mem.recall("amount cents")
    assert "[STALE: rows_changed data/orders.csv (2 → 3 rows)]" in hits_text(hits)
    assert [h.note.id for h in mem.recall("amount", stale=True)] == [note.id]
    assert [h.note.id for h in mem.recall("amount", stale=False)] == [other.id]
    assert [n.id for n in mem.stale().notes] == [note.id]

    verified = mem.verify(note.id)
    assert verified.stale == ()
    assert mem.stale().total == 0
    event = mem.history(note.id)[-1]
    assert event.type == "verified"
    assert event.data == {"retaken": 1, "cleared": ["rows_changed data/orders.csv (2 → 3 rows)"]}
    # Both fingerprints are kept: the one taken at remember time and the verified one.
    engine = mem._backend.engine
    rows = engine.store.con.execute(
        "SELECT seq, json_extract(fingerprint, '$.rows')::INT FROM anchors "
        "WHERE note_id = ? ORDER BY seq", [note.id]).fetchall()
    assert [r[1] for r in rows] == [2, 3]
    assert rows[1][0] == event.seq

    csv.write_text(ORDERS)  # back to two rows: now that differs from the verified state
    assert reasons(mem.get(note.id)) == [("rows_changed", "data/orders.csv", "3 → 2 rows")]


def write_parquet(path, select):
    con = duckdb.connect(":memory:")
    try:
        con.execute(f"COPY ({select}) TO '{path}' (FORMAT parquet)")
    finally:
        con.close()


def test_parquet_schema_change_names_the_columns(ws, mem):
    path = ws / "data" / "orders.parquet"
    original = "SELECT i::INTEGER AS id, (i * 100)::INTEGER AS amount, 'x' AS note FROM range(5) t(i)"
    write_parquet(path, original)
    note = mem.remember("amount is in cents", about=["data/orders.parquet"])
    assert [(a.kind, a.target, a.origin) for a in note.anchors] == [("data", "data/orders.parquet", "about")]

    write_parquet(path, "SELECT i::INTEGER AS id, (i * 1.0)::DOUBLE AS amount, "
                        "0.1::DOUBLE AS discount FROM range(5) t(i)")
    assert reasons(mem.get(note.id)) == [
        ("schema_changed", "data/orders.parquet",
         "added discount; removed note; changed amount INTEGER→DOUBLE")]

    write_parquet(path, original + " UNION ALL SELECT 9, 900, 'y'")
    assert reasons(mem.get(note.id)) == [("rows_changed", "data/orders.parquet", "5 → 6 rows")]

    write_parquet(path, original)
    assert mem.get(note.id).stale == ()


def test_directory_and_glob_anchors(ws, mem):
    note = mem.remember("every file in data/ is a daily export", about=["data/*.csv"])
    assert [(a.kind, a.target) for a in note.anchors] == [("glob", "data/*.csv"), ("dir", "data")]
    (ws / "data" / "returns.csv").write_text("id\n1\n")
    assert reasons(mem.get(note.id)) == [("content_changed", "data/*.csv", "+data/returns.csv"),
                                         ("content_changed", "data", "+returns.csv")]
    (ws / "data" / "returns.csv").unlink()
    assert mem.get(note.id).stale == ()
    (ws / "data" / "orders.csv").write_text(ORDERS.replace("2500", "2600"))
    assert reasons(mem.get(note.id)) == [("content_changed", "data/*.csv", "~data/orders.csv")]
    (ws / "data" / "orders.csv").unlink()
    assert reasons(mem.get(note.id)) == [("missing", "data/*.csv", "nothing matches"),
                                         ("content_changed", "data", "−orders.csv")]


@pytest.mark.skipif(os.name == "nt" or os.uname().sysname == "Darwin",
                    reason="a file name that is not UTF-8 (APFS and NTFS refuse one)")
def test_a_file_name_that_is_not_utf8_in_an_anchored_directory_is_a_change(ws, mem):
    """Unzipped from a Windows archive, it made listing, stale, recall and verify fail for
    the whole store (UnicodeEncodeError)."""
    note = mem.remember("the data folder holds the daily extracts", about=["data"])
    other = mem.remember("an unrelated note about unit prices")
    with open(os.path.join(bytes(ws / "data"), b"caf\xe9.csv"), "w") as handle:
        handle.write("x\n1\n")
    assert reasons(mem.get(note.id)) == [("content_changed", "data", "+caf\\xe9.csv")]
    assert mem.stale().total == 1 and mem.get(other.id).stale == ()
    mem.verify(note.id)
    assert mem.get(note.id).stale == ()
    assert mem.remember("and its csv files", about=["data"]).stale == ()


@pytest.mark.skipif(os.name == "nt", reason="symbolic links need privileges on Windows")
def test_a_link_named_in_a_notes_text_is_anchored_by_its_own_name(ws, mem):
    """'data/latest.csv' in a note's text was anchored to the file the link pointed to, so
    repointing the link flagged nothing (--about kept the link's name and did)."""
    (ws / "data" / "v1.csv").write_text("id,amount\n1,10\n")
    (ws / "data" / "v2.csv").write_text("id,amount,discount\n1,10,0\n2,20,0\n")
    (ws / "data" / "latest.csv").symlink_to("v1.csv")
    note = mem.remember("data/latest.csv holds the newest extract")
    assert [a.target for a in note.anchors] == ["data/latest.csv"]
    (ws / "data" / "latest.csv").unlink()
    (ws / "data" / "latest.csv").symlink_to("v2.csv")
    assert [r[0] for r in reasons(mem.get(note.id))] == ["schema_changed", "rows_changed"]


def test_about_a_path_that_reads_as_a_glob_or_in_another_unicode_form(ws, mem):
    """--about run[1]/out.csv (an existing file) was refused as a glob matching nothing, and
    --about café.csv typed in one Unicode form missed the file named in the other."""
    import unicodedata

    (ws / "run[1]").mkdir()
    (ws / "run[1]" / "out.csv").write_text("id\n1\n")
    note = mem.remember("the first run's output", about=["run[1]/out.csv"])
    assert [(a.kind, a.target) for a in note.anchors] == [("data", "run[1]/out.csv")]
    (ws / unicodedata.normalize("NFD", "café.csv")).write_text("id\n1\n")
    note = mem.remember("the café extract", about=[unicodedata.normalize("NFC", "café.csv")])
    assert [a.kind for a in note.anchors] == ["data"] and note.stale == ()


def test_about_something_that_does_not_exist_is_refused_and_nothing_stored(ws, mem):
    mem.remember("a first note")
    with pytest.raises(InvalidInput, match=r"about='data/nope\.csv': nothing exists there .*"
                                           r"The note was not stored\."):
        mem.remember("about a missing file", about=["data/nope.csv"])
    with pytest.raises(InvalidInput, match=r"about='data/\*\.xlsx': nothing matches there"):
        mem.remember("about a glob matching nothing", about=["data/*.xlsx"])
    with pytest.raises(InvalidInput) as caught:  # an absolute path was looked for only there
        mem.remember("about a missing absolute path", about=[str(ws / "none.csv")])
    assert str(caught.value).startswith(f"about={str(ws / 'none.csv')!r}: nothing exists there. ")
    with pytest.raises(InvalidInput) as caught:  # no file can have that name: not "missing"
        mem.remember("about a pasted path", about=["data/a\x00b.csv"])
    assert str(caught.value) == ("about='data/a\\x00b.csv': a path cannot hold a NUL character "
                                 "(U+0000); remove it. The note was not stored.")
    with pytest.raises(InvalidInput) as caught:  # the owner failed with a bare OSError
        mem.remember("about a path too long", about=["data/" + "a" * 100_000])
    assert str(caught.value) == (f"about='data/{'a' * 195}…': File name too long. Check the "
                                 "path. The note was not stored.")
    assert mem.notes().total == 1


def notebook(path, cells, kind="code"):
    nb = nbformat.v4.new_notebook()
    for cell_id, source in cells:
        cell = getattr(nbformat.v4, f"new_{kind}_cell")(source)
        cell.id = cell_id
        nb.cells.append(cell)
    return nbformat.writes(nb)


def test_cell_changed_when_the_saved_cell_differs(ws, mem):
    nb_path = ws / "analysis.ipynb"
    source = "df = load()\n%remember df.amount is in cents"
    nb_path.write_text(notebook(nb_path, [("c0", "import x"), ("c1", "")]))  # saved before the run
    prov = Provenance(notebook=str(nb_path), cell_id="c1", cell_hash=source_hash(source),
                      cell_source=source, source="notebook")
    note = mem.remember("df.amount is in cents", provenance=prov)
    assert note.anchors[-1].kind == "cell" and note.anchors[-1].target == "analysis.ipynb#c1"
    assert note.stale == ()  # the file predates the note: it says nothing about the cell

    save_later(nb_path, notebook(nb_path, [("c0", "import x"), ("c1", source)]))
    assert mem.get(note.id).stale == ()

    save_later(nb_path, notebook(nb_path, [("c0", "import x"), ("c1", source + " (or euros)")]))
    assert reasons(mem.get(note.id)) == [("cell_changed", "analysis.ipynb cell c1", "source edited")]

    save_later(nb_path, notebook(nb_path, [("c0", "import x"), ("c1", source)]))
    assert mem.get(note.id).stale == ()

    save_later(nb_path, notebook(nb_path, [("c0", "import x"), ("c1", source)], kind="raw"))
    assert reasons(mem.get(note.id)) == [("cell_changed", "analysis.ipynb cell c1",
                                          "cell turned into raw")]

    save_later(nb_path, notebook(nb_path, [("c0", "import x")]))
    assert reasons(mem.get(note.id)) == [("cell_changed", "analysis.ipynb cell c1", "cell deleted")]

    save_later(nb_path, notebook(nb_path, [("c0", "import x"), ("c1", "df = load_v2()")]))
    assert mem.get(note.id).stale != ()
    assert mem.verify(note.id).stale == ()


def test_variable_anchors_are_judged_only_with_the_kernels_fingerprints(ws, mem):
    from nbmemory.values import variable_fingerprint
    pd = pytest.importorskip("pandas")

    df = pd.DataFrame({"id": [1, 2], "amount": [10, 20]})
    anchor = Anchor("variable", "df", {**variable_fingerprint(df), "scope": "nb.ipynb"})
    note = mem.remember("df amounts are cents", about=[anchor])
    assert note.anchors[0].fingerprint["columns"] == [["id", "int64"], ["amount", "int64"]]

    df["discount"] = 0.5
    now = {"scope": "nb.ipynb", "values": {"df": variable_fingerprint(df)}}
    assert mem.get(note.id).stale == ()  # the engine alone cannot see a kernel's variable
    assert reasons(mem.recall("df amounts", variables=now)[0].note) == [
        ("schema_changed", "df", "added discount")]
    elsewhere = {"scope": "other.ipynb", "values": now["values"]}
    assert mem.recall("df amounts", variables=elsewhere)[0].note.stale == ()
    assert mem.variable_anchors("nb.ipynb") == ["df"]
    assert mem.variable_anchors("other.ipynb") == []

    assert mem.verify(note.id).stale == ()  # no fingerprints given: kept, and said so
    assert mem.history(note.id)[-1].data["kept"] == ["df"]
    assert mem.recall("df amounts", variables=now)[0].note.stale != ()
    assert mem.verify(note.id, variables=now).stale == ()
    assert mem.recall("df amounts", variables=now)[0].note.stale == ()


def test_a_diff_to_now_without_the_kernel_does_not_say_a_variable_note_is_fresh(ws, mem):
    """The CLI (and another notebook's kernel) cannot judge a variable: a note sealed stale
    for one was listed as "No longer stale" when diffed from there, though it still was."""
    from nbmemory.values import variable_fingerprint
    pd = pytest.importorskip("pandas")

    df = pd.DataFrame({"id": [1, 2], "amount": [10, 20]})
    anchor = Anchor("variable", "df", {**variable_fingerprint(df), "scope": "nb.ipynb"})
    note = mem.remember("df amounts are cents", about=[anchor])
    df["discount"] = 0.5
    now = {"scope": "nb.ipynb", "values": {"df": variable_fingerprint(df)}}
    mem.snapshot("sealed-stale", variables=now)
    for variables in (None, {"scope": "other.ipynb", "values": now["values"]}):
        assert mem.snapshot_diff("sealed-stale", variables=variables).changes == ()
    mem.verify(note.id, variables=now)  # fresh in its own kernel: that is said
    assert [(c.change, c.note.id) for c in mem.snapshot_diff("sealed-stale",
                                                           variables=now).changes] == [
        ("no_longer_stale", note.id)]


def test_an_unchanged_file_is_hashed_once_per_change(ws, mem, monkeypatch):
    note = mem.remember("data/orders.csv holds one row per order")
    calls = []
    original = stale_module.file_fingerprint
    monkeypatch.setattr(stale_module, "file_fingerprint",
                        lambda *a, **k: calls.append(a[0]) or original(*a, **k))
    for _ in range(3):
        assert mem.get(note.id).stale == ()
    assert calls == []  # (mtime, size) as fingerprinted: one stat, no hash
    os.utime(ws / "data" / "orders.csv", (time.time() + 5, time.time() + 5))  # touched only
    for _ in range(3):
        assert mem.get(note.id).stale == ()
    assert len(calls) == 1


def test_provenance_and_anchors_survive_reopening(ws):
    with Memory.open(ws / ".nbmemory", embedder=HashEmbedder()) as m:
        note = m.remember("src/resolver.py retries", provenance=Provenance(
            cwd=str(ws), author="ana", captured_at="2026-01-02T03:04:05+00:00", source="api"))
    (ws / "src" / "resolver.py").write_text("changed")
    with Memory.open(ws / ".nbmemory", embedder=HashEmbedder()) as m:
        again = m.get(note.id)
    assert again.provenance.author == "ana"
    assert reasons(again) == [("content_changed", "src/resolver.py", "")]
    assert again.to_dict()["anchors"][0]["target"] == "src/resolver.py"
    assert again.to_dict()["stale"] == [{"reason": "content_changed", "target": "src/resolver.py",
                                         "detail": ""}]


def test_a_store_from_before_anchors_is_migrated(ws, monkeypatch):
    store_dir = ws / ".nbmemory"
    store_dir.mkdir()
    with monkeypatch.context() as m:  # a store as the version before anchors wrote it
        m.setattr(store_module.schema, "MIGRATIONS", store_module.MIGRATIONS[:1])
        old = store_module.Store(store_dir)
        at = datetime.now(timezone.utc)
        with old.transaction():
            old.insert_note(1, uid="u1", at=at)
            seq = old.append_event("created", 1, actor="t", at=at)
            old.insert_version(1, text="src/resolver.py retries forever", content_hash="h",
                               kind="finding", priority="medium", tags=(), author="t",
                               provenance=Provenance(), at=at, seq=seq)
        old.close()
    with Memory.open(store_dir, embedder=HashEmbedder()) as mem:
        assert mem.get(1).anchors == ()
        assert mem.remember("src/resolver.py retries forever").anchors[0].target == "src/resolver.py"
        applied = mem._backend.engine.store.con.execute(
            "SELECT name FROM migrations ORDER BY name").fetchall()
    assert applied == [("m001_create_notes",), ("m002_anchors",), ("m003_embeddings_by_hash",),
                       ("m004_half_precision_vectors",)]


def test_a_retried_remember_is_applied_once_with_its_anchors(ws, mem):
    first = mem.remember("data/orders.csv is daily", request_id="r1")
    (ws / "data" / "orders.csv").unlink()
    again = mem.remember("data/orders.csv is daily", about=["data/orders.csv"], request_id="r1")
    assert again.id == first.id
    assert mem.notes().total == 1
    count = mem._backend.engine.store.con.execute("SELECT count(*) FROM anchors").fetchone()[0]
    assert count == 1


def test_anchors_travel_with_export_and_import_and_go_with_purge(ws, mem, tmp_path):
    note = mem.remember("data/orders.csv amount is in cents")
    mem.verify(note.id)
    mem.export_jsonl(tmp_path / "all.jsonl")
    (ws / "data" / "orders.csv").write_text(ORDERS + "3,4200\n")
    with Memory.open(tmp_path / "other" / ".nbmemory", embedder=HashEmbedder()) as other:
        other.import_jsonl(tmp_path / "all.jsonl")
        copy = other.get(note.id)
        assert [(a.kind, a.target) for a in copy.anchors] == [("data", "data/orders.csv")]
    mem.purge(note.id)
    engine = mem._backend.engine
    assert engine.store.con.execute("SELECT count(*) FROM anchors").fetchone()[0] == 0
    assert mem.stale().total == 0


def test_editing_the_text_moves_its_path_anchors(ws, mem):
    note = mem.remember("data/orders.csv amount is in cents", about=["src/resolver.py"])
    edited = mem.edit(note.id, text="data/returns are separate; see src/resolver.py and data/")
    assert [(a.kind, a.target, a.origin) for a in edited.anchors] == [
        ("file", "src/resolver.py", "about"), ("dir", "data", "text")]
    (ws / "data" / "orders.csv").write_text("gone\n")
    assert reasons(mem.get(note.id)) == []  # no longer about the CSV
    rows = mem._backend.engine.store.con.execute(
        "SELECT position, target, json_extract(fingerprint, '$.dropped')::BOOLEAN "
        "FROM anchors WHERE note_id = ? ORDER BY seq, position", [note.id]).fetchall()
    assert rows == [(0, "src/resolver.py", None), (1, "data/orders.csv", None),
                    (1, "data/orders.csv", True), (2, "data", None)]


def test_recall_as_of_a_snapshot_filters_by_staleness_as_it_was_sealed(ws, mem):
    """The hits of --as-of show the flags sealed then: --stale/--fresh must filter by the
    same, not by today's (a note fresh then was listed as stale with no flag shown)."""
    note = mem.remember("data/orders.csv amount is in cents")
    mem.snapshot("fresh-then")
    (ws / "data" / "orders.csv").write_text(ORDERS + "3,4200\n")
    assert [h.note.id for h in mem.recall("amount in cents", stale=True)] == [note.id]
    assert [h.note.id for h in mem.recall("amount in cents", as_of="fresh-then",
                                          stale=True)] == []
    [hit] = mem.recall("amount in cents", as_of="fresh-then", stale=False)
    assert (hit.note.id, hit.note.stale) == (note.id, ())


def test_a_snapshot_diff_says_which_notes_went_stale_and_why(ws, mem):
    mem.remember("data/orders.csv amount is in cents")
    mem.snapshot("before")
    (ws / "data" / "orders.csv").write_text(ORDERS + "3,4200\n")
    changes = mem.snapshot_diff("before").changes
    assert [(c.change, c.note.id, c.detail) for c in changes] == [
        ("became_stale", 1, "rows_changed data/orders.csv (2 → 3 rows)")]
    # ... and as data, for the panel to say in its own words.
    assert changes[0].reasons == (StaleReason("rows_changed", "data/orders.csv", "2 → 3 rows"),)
    assert changes[0].to_dict()["reasons"] == [
        {"reason": "rows_changed", "target": "data/orders.csv", "detail": "2 → 3 rows"}]
    assert changes[0].note.stale == changes[0].reasons  # the note shown is stale too
    # Stale already, for another reason now: not "became stale" again.
    mem.snapshot("stale")
    (ws / "data" / "orders.csv").write_text(ORDERS + "3,4200\n4,17\n")
    [change] = mem.snapshot_diff("stale").changes
    assert (change.change, change.detail) == (
        "stale_anew", "rows_changed data/orders.csv (2 → 4 rows)")
    assert "Still stale, for new reasons (1):\n  #1 [rows_changed data/orders.csv (2 → 4 rows)]" \
        in diff_display(mem.snapshot_diff("stale")).text


def test_listing_only_stale_or_only_fresh_notes_counts_what_it_keeps(mem, ws):
    stale_ids = [mem.remember(f"orders.amount is in cents, finding {i}",
                              about=["data/orders.csv"]).id for i in range(3)]
    fresh_ids = [mem.remember(f"resolver finding {i} with no file").id for i in range(4)]
    save_later(ws / "data" / "orders.csv", ORDERS + "3,99\n")
    page = mem.notes(stale=True, limit=2)
    assert page.total == 3 and len(page.notes) == 2
    assert {n.id for n in page.notes} <= set(stale_ids) and all(n.is_stale for n in page.notes)
    page = mem.notes(stale=False, limit=50)
    assert page.total == 4 and sorted(n.id for n in page.notes) == fresh_ids
    assert mem.notes().total == 7


def test_a_relative_about_path_means_the_callers_working_directory(tmp_path, monkeypatch):
    """A script run in a checkout, its store elsewhere (NBMEMORY_HOME): data/orders.csv is
    the one the script sees."""
    checkout = tmp_path / "checkout"
    (checkout / "data").mkdir(parents=True)
    (checkout / "data" / "orders.csv").write_text(ORDERS)
    monkeypatch.chdir(checkout)
    with Memory.open(tmp_path / "elsewhere" / ".nbmemory", embedder=HashEmbedder()) as mem:
        note = mem.remember("amount is in cents", about=["data/orders.csv", "data/*.csv"])
        targets = sorted(a.target for a in note.anchors)
        assert targets == [str(checkout / "data" / "*.csv"), str(checkout / "data" / "orders.csv")]
        with pytest.raises(InvalidInput, match="about='data/missing.csv': nothing exists there"):
            mem.remember("no such file", about=["data/missing.csv"])


def test_a_path_in_a_notes_text_is_the_one_its_writer_sees_first(ws, mem, monkeypatch):
    """Written in sub/, where a data/orders.csv of its own is: --about took sub's file, the
    same path in the text took the workspace's."""
    (ws / "sub" / "data").mkdir(parents=True)
    (ws / "sub" / "data" / "orders.csv").write_text(ORDERS)
    monkeypatch.chdir(ws / "sub")
    note = mem.remember("data/orders.csv here holds one order per row", about=["data/orders.csv"],
                        provenance=Provenance(cwd=str(ws / "sub")))  # as the CLI and magics say
    assert [(a.origin, a.target) for a in note.anchors] == [("about", "sub/data/orders.csv")]


def test_devices_fifos_and_proc_are_never_read_so_no_write_hangs(mem, ws):
    fifo = ws / "data" / "pipe.csv"
    os.mkfifo(fifo)  # reading it would block until a writer came
    with pytest.raises(InvalidInput, match=r"about='data/pipe.csv': .*not a regular file"):
        mem.remember("the pipe carries orders", about=["data/pipe.csv"])
    with pytest.raises(InvalidInput, match=r"about=./proc/\*.: .*never reads /proc"):
        mem.remember("kernel counters", about=["/proc/*"])
    # Named in the text, they are simply not anchored (the note is stored).
    note = mem.remember("OOM kills show up in /proc/kmsg and data/pipe.csv")
    assert [a.target for a in note.anchors] == []


def test_a_glob_that_would_walk_too_much_is_refused(mem, ws, monkeypatch):
    monkeypatch.setattr("nbmemory.anchors.MAX_GLOB_ENTRIES", 3)
    for i in range(5):
        (ws / "data" / f"part{i}.csv").write_text(ORDERS)
    with pytest.raises(InvalidInput, match=r"matches too much .*narrow it"):
        mem.remember("all the parts", about=["data/**/*"])
    assert mem.notes().total == 0


def test_a_glob_past_its_watched_files_counts_the_rest(mem, ws, monkeypatch):
    from nbmemory.wording import anchors_line

    monkeypatch.setattr("nbmemory.anchors.MAX_GLOB_MATCHES", 2)
    monkeypatch.setattr("nbmemory.stale.MAX_GLOB_MATCHES", 2)
    for i in range(3):
        (ws / "data" / f"part{i}.csv").write_text(ORDERS)
    note = mem.remember("every part has the same columns", about=["data/*.csv"])
    assert anchors_line(note).startswith("data/*.csv (2 files; 2 more counted, not read)")
    (ws / "data" / "part9.csv").write_text(ORDERS)  # sorts past the files read
    assert reasons(mem.get(note.id))[:1] == [
        ("content_changed", "data/*.csv", "3 files past the first 2, were 2")]


def test_a_glob_fingerprinted_before_the_rest_was_counted_is_not_stale(ws, monkeypatch):
    """A glob over more files than are read, fingerprinted by a version that did not count
    the rest, went stale on upgrading: "100 files past the first 500, were 0"."""
    monkeypatch.setattr("nbmemory.anchors.MAX_GLOB_MATCHES", 2)
    monkeypatch.setattr("nbmemory.stale.MAX_GLOB_MATCHES", 2)
    for i in range(3):
        (ws / "data" / f"part{i}.csv").write_text(ORDERS)
    with Memory.open(ws / ".nbmemory", embedder=HashEmbedder()) as mem:
        note = mem.remember("every part has the same columns", about=["data/*.csv"])
    store = store_module.Store(ws / ".nbmemory")  # as an older nbmemory wrote it: no count
    store.con.execute("UPDATE anchors SET fingerprint = json_remove(fingerprint, '$.more')")
    store.close()
    with Memory.open(ws / ".nbmemory", embedder=HashEmbedder()) as mem:
        assert reasons(mem.get(note.id)) == []


@pytest.mark.skipif(not hasattr(os, "symlink") or os.name == "nt", reason="POSIX links")
def test_a_link_is_watched_as_named_so_repointing_it_is_a_change(mem, ws):
    (ws / "data" / "2024-04.csv").write_text(ORDERS)
    (ws / "data" / "2024-05.csv").write_text(ORDERS + "3,990\n")
    (ws / "data" / "latest.csv").symlink_to("2024-04.csv")
    note = mem.remember("latest has two orders", about=["data/latest.csv"])
    assert [a.target for a in note.anchors] == ["data/latest.csv"]
    assert mem.get(note.id).stale == ()
    (ws / "data" / "latest.csv").unlink()
    (ws / "data" / "latest.csv").symlink_to("2024-05.csv")
    assert [r[:2] for r in reasons(mem.get(note.id))] == [("rows_changed", "data/latest.csv")]


def test_a_database_written_by_a_connection_still_open_is_stale(mem, ws):
    """DuckDB keeps a connection's writes in its .wal until a checkpoint (at close)."""
    warehouse = ws / "data" / "warehouse.duckdb"
    with duckdb.connect(str(warehouse)) as con:
        con.execute("CREATE TABLE t AS SELECT * FROM range(10) r(i)")
    note = mem.remember("t has ten rows", about=["data/warehouse.duckdb"])
    assert mem.get(note.id).stale == ()
    con = duckdb.connect(str(warehouse))
    try:
        con.execute("DELETE FROM t WHERE i > 0")
        assert reasons(mem.get(note.id)) == [
            ("content_changed", "data/warehouse.duckdb", "its write-ahead log changed")]
    finally:
        con.close()
    assert reasons(mem.get(note.id)) == [("content_changed", "data/warehouse.duckdb", "")]
    assert mem.verify(note.id).stale == ()


def test_a_file_verified_while_gone_is_flagged_only_if_it_comes_back_changed(mem, ws):
    from nbmemory.wording import verified_text

    (ws / "data" / "back.csv").write_text(ORDERS)
    note = mem.remember("back has two orders", about=["data/back.csv"])
    (ws / "data" / "back.csv").unlink()
    verified = mem.verify(note.id)
    assert "comes back changed" in verified_text(verified, mem.history(note.id)[-1])
    assert verified.stale == ()
    (ws / "data" / "back.csv").write_text(ORDERS)  # restored as it was (git checkout)
    assert mem.get(note.id).stale == ()
    (ws / "data" / "back.csv").write_text(ORDERS + "3,990\n")
    assert reasons(mem.get(note.id)) == [
        ("content_changed", "data/back.csv", "it exists again, changed")]


def test_a_correction_is_about_what_the_note_it_supersedes_was_about(mem, ws):
    """A stale note superseded by its correction: the correction watches the same file,
    fingerprinted now (not stale at once), and is flagged when it changes again."""
    note = mem.remember("orders has two rows", about=["data/orders.csv"])
    (ws / "data" / "orders.csv").write_text(ORDERS + "3,990\n")
    assert [r[0] for r in reasons(mem.get(note.id))] == ["rows_changed"]
    fixed = mem.supersede(note.id, "orders has three rows")
    assert [(a.kind, a.target) for a in fixed.anchors] == [("data", "data/orders.csv")]
    assert mem.get(fixed.id).stale == ()
    (ws / "data" / "orders.csv").write_text(ORDERS + "3,990\n4,15\n")
    assert [r[0] for r in reasons(mem.get(fixed.id))] == ["rows_changed"]
    alone = mem.supersede(fixed.id, "orders is not worth watching", about=[])
    assert alone.anchors == ()


class Cleaner:
    """An object without a repr of its own: its repr is its memory address."""

    def __init__(self, level):
        self.level = level


def test_containers_are_compared_by_their_content_not_their_repr(ws, mem):
    from nbmemory.values import variable_fingerprint
    pd = pytest.importorskip("pandas")

    def judged(value, name="cfg"):
        kernel = {"scope": "nb.ipynb", "values": {name: variable_fingerprint(value)}}
        return reasons(mem.recall(f"{name} settings", variables=kernel)[0].note)

    def anchored(value, name="cfg"):
        fingerprint = {**variable_fingerprint(value), "scope": "nb.ipynb"}
        return mem.remember(f"{name} settings hold", about=[Anchor("variable", name, fingerprint)])

    note = anchored({"scale": 2.0, "cleaner": Cleaner(1), "frames": {
        "jan": pd.DataFrame({"v": range(100)}), "feb": pd.DataFrame({"v": range(100)})}})
    again = {"frames": {"feb": pd.DataFrame({"v": range(100)}),  # the cell run again
                        "jan": pd.DataFrame({"v": range(100)})}, "cleaner": Cleaner(1), "scale": 2.0}
    assert judged(again) == []  # a new address, another key order: the same content
    with pd.option_context("display.max_rows", 500):  # a display option is not the data
        assert judged(again) == []
    again["frames"]["jan"].loc[50, "v"] = -1  # past what the frame's repr shows
    assert judged(again) == [("content_changed", "cfg", "")]
    mem.forget(note.id)

    events = pd.DataFrame({"id": [1, 2], "tags": [["a"], ["b"]]})  # lists: unhashable
    anchored(events, "events")
    events.at[0, "tags"] = ["zzz"]
    assert judged(events, "events") == [("content_changed", "events", "")]


def test_a_container_fingerprinted_by_its_repr_is_not_called_changed(ws, mem):
    """Notes anchored before containers were hashed by content keep their repr's hash and
    no scheme: compared with the new hash they would all look changed."""
    from nbmemory.values import variable_fingerprint

    now = {**variable_fingerprint({"a": 1}), "scope": "nb.ipynb"}
    before = {k: v for k, v in now.items() if k != "sample_scheme"}
    before["sample"] = "the-hash-of-its-repr"
    mem.remember("cfg holds a", about=[Anchor("variable", "cfg", before)])
    kernel = {"scope": "nb.ipynb", "values": {"cfg": variable_fingerprint({"a": 2})}}
    assert mem.recall("cfg holds", variables=kernel)[0].note.stale == ()


def test_a_variable_fingerprint_from_another_sampling_scheme_is_not_called_changed(ws, mem):
    from nbmemory.values import variable_fingerprint
    pl = pytest.importorskip("polars")

    df = pl.DataFrame({"id": [1, 2], "amount": [10, 20]})
    now = {**variable_fingerprint(df), "scope": "nb.ipynb"}
    before = {k: v for k, v in now.items() if k != "sample_scheme"}  # as polars' hash_rows
    before["sample"] = "taken-with-hash_rows"                         # era fingerprinted it
    note = mem.remember("df amounts are cents", about=[Anchor("variable", "df", before)])
    kernel = {"scope": "nb.ipynb", "values": {"df": now}}
    assert mem.recall("df amounts", variables=kernel)[0].note.stale == ()
    changed = variable_fingerprint(df.with_columns(pl.col("amount") * 100))
    kernel["values"]["df"] = changed
    assert mem.verify(note.id, variables={"scope": "nb.ipynb", "values": {"df": now}}).stale == ()
    assert reasons(mem.recall("df amounts", variables=kernel)[0].note) == [
        ("content_changed", "df", "")]


def test_a_checkout_cloned_after_a_search_is_found_at_the_next(tmp_path, monkeypatch):
    """A team store's owner looks for a repository's checkout under the home directory; one
    cloned later was never found until the owner restarted."""
    import subprocess

    from nbmemory import repos

    home = tmp_path / "home"
    home.mkdir()
    known = repos.Repositories(tmp_path / "repositories.json", search=home)
    assert known.locate("github.com/team/billing") is None
    clone = home / "work" / "billing"
    clone.mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(clone)], check=True)
    subprocess.run(["git", "-C", str(clone), "remote", "add", "origin",
                    "git@github.com:team/billing.git"], check=True)
    assert known.locate("github.com/team/billing") is None  # searched a moment ago
    monkeypatch.setattr(repos, "SEARCH_AGAIN_S", 0)  # ... and now a while ago
    assert known.locate("github.com/team/billing") == clone.resolve()


def test_a_large_frame_is_compared_by_rows_spread_over_it_and_quickly():
    """Frames past 100,000 values were compared by shape alone (over 10k rows), or hashed
    whole at every cell touching them (a 10k x 100 frame of strings: 0.9 s a cell)."""
    import numpy as np
    import pandas as pd

    from nbmemory.values import ROWS_SAMPLE_SCHEME, variable_fingerprint

    tall = pd.DataFrame({"amount": np.arange(200_000, dtype=float), "id": np.arange(200_000)})
    before = variable_fingerprint(tall)
    assert before["sample_scheme"] == ROWS_SAMPLE_SCHEME
    tall.loc[:50_000, "amount"] = np.nan  # a quarter of the rows: no longer only the shape
    assert variable_fingerprint(tall)["sample"] != before["sample"]
    wide = pd.DataFrame({f"c{i}": [f"value {j}" for j in range(10_000)] for i in range(100)})
    first = variable_fingerprint(wide)  # a sample of its rows: see bench/ for the time
    assert first["sample_scheme"] == ROWS_SAMPLE_SCHEME
    wide.iloc[-1, 0] = "changed"  # the last row is always among those hashed
    assert variable_fingerprint(wide)["sample"] != first["sample"]
    small = pd.DataFrame({"a": [1, 2, 3]})
    assert "sample_scheme" not in variable_fingerprint(small)  # hashed whole, as before


def test_a_glob_means_what_glob_reads_it_as_wherever_notes_are_looked_up(ws, mem):
    """The ambient line and notes_about matched globs with fnmatch, whose * crosses folders
    and whose **/ needs one: a note on data/*.csv came up for data/archive/old.csv, and one
    on logs/**/*.log stayed silent for logs/app.log."""
    from nbmemory.anchors import glob_match

    for pattern, path, matches in (("data/*.csv", "data/a.csv", True),
                                   ("data/*.csv", "data/archive/old.csv", False),
                                   ("logs/**/*.log", "logs/app.log", True),
                                   ("logs/**/*.log", "logs/2024/06/x.log", True),
                                   ("run[1]/out.csv", "run1/out.csv", True),
                                   ("d/[!a]*.csv", "d/a.csv", False), ("a?c", "a/c", False),
                                   ("data/*.csv", "data/.dot.csv", False),  # as glob: hidden
                                   ("logs/**/*.log", "logs/.cache/x.log", False),
                                   ("data/[^a].csv", "data/^.csv", True),  # ^ is itself
                                   ("data/[[]x].csv", "data/[x].csv", True)):
        assert glob_match(pattern, path) is matches, (pattern, path)
    for path in ("data/archive/old.csv", "logs/app.log"):
        (ws / path).parent.mkdir(parents=True, exist_ok=True)
        (ws / path).write_text("x\n1\n")
    mem.remember("top-level data csvs are in cents", about=["data/*.csv"])
    logs = mem.remember("all logs rotate daily", about=["logs/**/*.log"])
    found = mem.notes_about(paths=[str(ws / "data/archive/old.csv"), str(ws / "logs/app.log")])
    assert {path: [h.note.id for h in hits] for path, hits in found["paths"].items()} == {
        "logs/app.log": [logs.id]}
