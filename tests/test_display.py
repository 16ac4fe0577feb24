"""What notes look like in any script: terminal text sized in display columns (Chinese and
emoji take two, combining marks none), HTML whose note text sets its own direction."""

import textwrap
from datetime import timezone
from zoneinfo import ZoneInfo

import pytest
from IPython.core.interactiveshell import InteractiveShell
from IPython.utils.capture import capture_output

from nbmemory.browse import note_html
from nbmemory.columns import ljust, shorten, width, wrap
from nbmemory.display import diff_display, history_display, notes_display, snapshots_display
from nbmemory.embed import HashEmbedder
from nbmemory.markdown import export_markdown
from nbmemory.memory import Memory

HEBREW = "עמודת הסכום נשמרת באגורות לפני מרץ 2021."
JAPANESE = "注文金額は2021年3月まで銭単位で保存されていた。月次売上を計算する前に単位を揃えること。"


def test_columns_count_wide_characters_twice_and_marks_not_at_all():
    assert [width(t) for t in ("abc", "订单", "🎉", "cafe\u0301", "कुल", "a\u200db")] == [
        3, 4, 2, 4, 2, 2]
    assert ljust("订单", 6) + "|" == "订单  |"
    assert ljust("cafe\u0301", 6) + "|" == "cafe\u0301  |"


def test_shortening_cuts_text_without_spaces_by_columns():
    assert shorten(JAPANESE, 30, placeholder=" ...") == "注文金額は2021年3月まで銭 ..."
    # A space in the first half of the room is not worth what it leaves out.
    assert shorten("订单 " + JAPANESE, 30, placeholder=" ...") == "订单 注文金額は2021年3月ま ..."
    assert shorten("see /data/warehouse/orders/2021/amount_in_cents.parquet first", 30) == (
        "see /data/warehouse/orde [...]")  # textwrap said "see [...]"
    # A cut inside a joined emoji or an Indic conjunct leaves no joiner or virama dangling.
    assert shorten("👨\u200d👩\u200d👧\u200d👦 family", 6, placeholder="…") == "👨\u200d👩…"
    assert shorten("क्षिक्षा", 5, placeholder="…") == "क्षिक…"  # not क्षिक्, its virama open
    assert shorten("क्षिक्षा", 4, placeholder="…") == "क्षि…"


@pytest.mark.parametrize("text", [
    "the watcher thread races acquire_lock at startup, so the first write can be lost",
    "a well-known problem: orders.amount is in cents before 2021 and in euros after it",
    "  spaces\tand\nnewlines   collapse  ", "short"])
def test_english_is_shortened_and_wrapped_as_textwrap_does(text):
    for size in (20, 33, 60):
        assert shorten(text, size) == textwrap.shorten(text, size)
        assert wrap(text, size, "  ") == textwrap.wrap(text, size, initial_indent="  ",
                                                       subsequent_indent="  ")


def test_wrapping_breaks_japanese_by_columns_and_keeps_punctuation_with_its_sentence():
    assert wrap(JAPANESE, 30, "  ") == [
        "  注文金額は2021年3月まで銭単",
        "  位で保存されていた。月次売上",
        "  を計算する前に単位を揃えるこ",
        "  と。"]
    assert wrap("价格 is in cents", 8) == ["价格 is", "in cents"]


@pytest.fixture
def mem(memory):
    memory.remember(HEBREW, tags=["café", "כסף"])
    memory.remember("the watcher races acquire_lock <b>at startup</b>")
    return memory


def test_a_notes_text_and_tags_take_their_direction_from_themselves(mem):
    """Hebrew in a left-to-right cell put "2021." at the wrong end; dir="auto" lets the
    browser read the text's own direction. The text stays escaped."""
    hits = mem.recall("עמודת הסכום", k=1)
    assert f'<td dir="auto">café, כסף</td><td dir="auto">{HEBREW}</td>' in hits._repr_html_()
    listed = notes_display(mem.notes().notes).html
    assert f'<td dir="auto">{HEBREW}</td>' in listed
    assert ('<td dir="auto">the watcher races acquire_lock &lt;b&gt;at startup&lt;/b&gt;</td>'
            in listed)
    note = mem.get(1)
    assert f'<div dir="auto">{HEBREW}</div>' in note_html(note)
    assert '<span dir="auto">café, כסף</span>' in note_html(note)
    mem.snapshot("before")
    mem.forget(1)
    assert f'<li>#1 <span dir="auto">{HEBREW}</span></li>' in diff_display(
        mem.snapshot_diff("before")).html


def test_the_threshold_hint_speaks_the_python_api(mem):
    hits = mem.recall("watcher races", min_score=0.5)
    assert str(hits).splitlines()[-1] == (
        "(1 more below the score threshold; lower it with min_score=)")
    assert "lower it with <code>min_score=</code>." in hits._repr_html_()


def test_the_threshold_hint_speaks_the_magic(store_dir, mem, monkeypatch):
    original = Memory.open
    monkeypatch.setattr(Memory, "open", lambda path=None, **kw: original(
        path, **{**kw, "embedder": HashEmbedder()}))
    mem.close()
    shell = InteractiveShell.instance(history_length=0)
    try:
        shell.run_line_magic("load_ext", "nbmemory")
        shell.run_line_magic("config", f"NbMemory.store = {str(store_dir)!r}")
        with capture_output():
            hits = shell.run_line_magic("recall", "--min-score 0.5 watcher races")
        assert str(hits).splitlines()[-1] == (
            "(1 more below the score threshold; lower it with --min-score)")
        shell.run_line_magic("unload_ext", "nbmemory")
    finally:
        InteractiveShell.clear_instance()


def test_a_first_line_may_have_its_own_indent():
    """nbmemory stale prints why a note is stale from the margin, then indents."""
    why = "#12  content_changed 数据/很长的目录名称/另一个很长的目录名称/表格文件名称非常非常长.csv"
    lines = wrap(why, 40, "    ", first="")
    assert lines[0].startswith("#12 ") and all(line.startswith("    ") for line in lines[1:])
    assert max(width(line) for line in lines) <= 40 and len(lines) > 2
    english = "#3  content_changed src/a.py; rows_changed data/orders.csv (2 → 3 rows)"
    assert wrap(english, 40, "    ", first="") == textwrap.wrap(english, 40,
                                                                subsequent_indent="    ")


@pytest.fixture
def kathmandu(monkeypatch):
    """This machine's time zone set to one 5:45 from UTC, so no UTC time passes for local."""
    time = pytest.importorskip("time")
    if not hasattr(time, "tzset"):
        pytest.skip("time.tzset is Unix only")
    monkeypatch.setenv("TZ", "Asia/Kathmandu")
    time.tzset()
    yield ZoneInfo("Asia/Kathmandu")
    monkeypatch.delenv("TZ")
    time.tzset()


def test_times_are_shown_in_the_time_zone_a_bare_day_is_read_in(memory, kathmandu, tmp_path):
    """`--since 2024-03-12` means that day here, so times shown are here too, not UTC."""
    note = memory.remember("the nightly export moved to Airflow")
    note = memory.edit(note.id, text="the nightly export moved to Airflow in March")
    snap = memory.snapshot("before-q3", message="a seal")
    shown = {"snapshots": snapshots_display(memory.snapshots()).text,
             "history": history_display(note.id, memory.history(note.id),
                                        versions=memory.versions(note.id)).text}
    for what, at, fmt in (("snapshots", snap.at, "%Y-%m-%d %H:%M"),
                          ("history", note.updated_at, "%Y-%m-%d %H:%M")):
        assert at.astimezone(kathmandu).strftime(fmt) in shown[what], what
        assert at.astimezone(timezone.utc).strftime(fmt) not in shown[what], what
    pages = "".join(page.read_text() for page in export_markdown([note], tmp_path))
    assert f"- written {note.created_at.astimezone(kathmandu):%Y-%m-%d}" in pages


def test_a_cell_run_again_says_its_note_went_stale(memory, tmp_path):
    """Found by a walkthrough: Run All said "Already remembered as #7" under a cell whose
    note had gone stale (its column was gone), so the notebook looked clean."""
    from nbmemory.display import already_display

    data = tmp_path / "orders.csv"
    data.write_text("id,amount\n1,100\n")
    note = memory.remember("amounts are in cents", about=[str(data)])
    assert "stale" not in already_display(memory.get(note.id)).text
    data.write_text("id,amount_cents\n1,100\n")
    said = already_display(memory.get(note.id)).text
    assert said.startswith(f"Already remembered as #{note.id} by this cell")
    assert "; stale now: schema_changed " in said and "(added amount_cents; removed amount)" \
        in said and said.endswith(": not written again. (Change the line to write a new note.)")
