"""The magics in a real, history-less InteractiveShell."""

import re

import pytest
from IPython.core.error import StdinNotImplementedError, UsageError
from IPython.core.interactiveshell import InteractiveShell
from IPython.utils.capture import capture_output

from nbmemory.checks import evaluate
from nbmemory.config import Settings
from nbmemory.embed import HashEmbedder
from nbmemory.errors import InvalidInput
from nbmemory.magic_args import keep_question_marks
from nbmemory.magics import NbMemory, split_options
from nbmemory.memory import Memory
from nbmemory.models import Hits


@pytest.fixture
def ip(store_dir, monkeypatch):
    shell = InteractiveShell.instance(history_length=0)
    shell.run_line_magic("load_ext", "nbmemory")
    magics = shell.magics_manager.registry["NbMemory"]
    shell.run_line_magic("config", f"NbMemory.store = {str(store_dir)!r}")
    # The hash embedder stands in for the model: these tests are about the magics.
    monkeypatch.setattr(Memory, "open", _open_with_hash(Memory.open))
    yield shell
    shell.run_line_magic("unload_ext", "nbmemory")
    InteractiveShell.clear_instance()


def _open_with_hash(original):
    def open_(path=None, **kwargs):
        kwargs["embedder"] = HashEmbedder()
        return original(path, **kwargs)
    return open_


class Shown:
    """What a magic printed or displayed, as the plain text a terminal would show."""

    def __init__(self, captured):
        self.stdout = captured.stdout + "".join(
            o.data.get("text/plain", "") + "\n" for o in captured.outputs)
        self.html = "".join(o.data.get("text/html", "") for o in captured.outputs)
        self.stderr = captured.stderr


def run(ip, line, cell=None):
    name, _, rest = line.partition(" ")
    with capture_output() as captured:
        if cell is None:
            result = ip.run_line_magic(name, rest)
        else:
            result = ip.run_cell_magic(name, rest, cell)
    return result, Shown(captured)


def test_remember_line_form_keeps_quotes_and_options(ip):
    _, out = run(ip, "remember -p high -t orders,units -k gotcha don't sum \"amount\" across 2021")
    assert "Remembered #1 (gotcha, high) [orders, units]" in out.stdout
    hits, _ = run(ip, "recall amount")
    assert hits[0].note.text == "don't sum \"amount\" across 2021"
    assert hits[0].note.provenance.source == "ipython"


def test_notes_and_queries_keep_dollars_and_braces_while_options_are_filled_in(ip):
    # IPython would put variables and expressions in place of $name and {expr} everywhere;
    # in options that is handy (--about {DATA}/orders.csv), in a note it changes the finding.
    ip.user_ns.update(amount=42, topic="prices")
    run(ip, "remember -t {topic} price is $amount in USD, {amount} and {1+1}; costs $5")
    run(ip, "remember -t $topic,raw", "format with '{:>10}' and ${amount}")
    run(ip, "remember --check 'len({1, 2}) == 2' -t sets {1, 2} has two members")
    hits, _ = run(ip, "recall -t {topic} price $amount {amount}")
    assert [h.note.text for h in hits] == [
        "price is $amount in USD, {amount} and {1+1}; costs $5",
        "format with '{:>10}' and ${amount}"]
    assert [h.note.tags for h in hits] == [("prices",), ("prices", "raw")]
    assert hits.query == "price $amount {amount}"
    [checked] = run(ip, "recall -t sets members")[0]
    assert checked.note.text == "{1, 2} has two members"
    assert [a.target for a in checked.note.anchors if a.kind == "check"] == ["len({1, 2}) == 2"]


def test_an_option_naming_an_undefined_variable_says_so(ip):
    with capture_output() as captured:
        with pytest.raises(UsageError, match=r"--about .*\{DATA\}/orders\.csv: nothing exists "):
            ip.run_line_magic("remember", "--about {DATA}/orders.csv amounts are in cents")
    assert captured.stderr == ("nbmemory: {DATA}/orders.csv is used as typed (name 'DATA' is "
                               "not defined in this kernel)\n")


def test_remember_cell_form_uses_the_body(ip):
    run(ip, "remember -t locks", "acquire_lock() must run first.\nThe watcher races it.")
    note = run(ip, "recall watcher")[0][0].note
    assert note.text == "acquire_lock() must run first.\nThe watcher races it."
    assert note.tags == ("locks",)


def test_remember_shows_similar_notes(ip):
    run(ip, "remember the watcher thread races acquire_lock at startup")
    _, out = run(ip, "remember acquire_lock races the watcher thread at startup")
    assert "Similar (not merged): #1 (" in out.stdout


def test_recall_returns_hits_with_html_and_text(ip):
    run(ip, "remember -t orders orders.amount is in cents <b>before</b> 2021")
    hits, _ = run(ip, "recall -k 3 --explain orders.amount")
    assert isinstance(hits, Hits) and len(hits) == 1
    html = hits._repr_html_()
    assert "&lt;b&gt;before&lt;/b&gt;" in html and "<b>before</b>" not in html
    assert "lexical" in html and "Keyword weight" in html
    from IPython.lib.pretty import pretty

    assert pretty(hits).startswith("#1  ") and str(hits) == pretty(hits)
    run(ip, "remember orders.amount \x1b]0;pwned\x07 retitles a terminal")
    hits, _ = run(ip, "recall orders.amount retitles")
    assert "\\x1b]0;pwned\\x07" in pretty(hits) and "\x1b" not in pretty(hits)


@pytest.mark.parametrize("line, message", [
    ("remember", "The note is empty"),
    ("remember -p urgent finding", "Unknown priority 'urgent'"),
    ("remember -k idea finding", "Unknown kind 'idea'"),
    ("remember --colour red finding", "Unknown option --colour"),
    # One dash: -tag was read as -t ag (the tag "ag"), -about as words of the note.
    ("remember -tag orders amounts are in cents", r"^Unknown option -tag: --tags takes two "
                                                  r"dashes \(or write -- before a text that "
                                                  r"starts with a dash\); nothing was done\.$"),
    ("remember -about data.csv amounts are in cents", "^Unknown option -about: --about takes"),
    ("recall -kind gotcha amounts", "^Unknown option -kind: --kind takes two dashes"),
    ("recall", "Nothing to recall about"),
    ("recall -t customers", r"^-t needs a query: %recall -t \.\.\. <what you want to know>\. "
                            r"With no query, %recall shows the notes about this kernel's "
                            r"variables; to list notes by tag, kind or priority: %memory list"),
    ("recall --kind decision -p low", "^--kind, -p need a query"),
    ("recall --as-of nosuchsnap", "^--as-of needs a query"),
    ("recall --min-score 0.99", "^--min-score needs a query"),
    ("recall --mode lexical", "^--mode needs a query"),
    ("recall --mode keywords x", r"argument --mode: invalid choice: 'keywords'"),
    ("recall -k 0 x", "k must be at least 1"),
    ("recall --since yesterday x", "Cannot read the time 'yesterday'"),
    ("recall --min-score 5 x", r"min_score is a score from -1 to 1 .*, not 5\.0$"),
    ("memory list --status nope", "Unknown status 'nope'; use one or more of: active, revoked"),
    ("memory list -n 0", r"^-n is how many notes to show: at least 1 \(got 0\)\.$"),
    ("memory export", r"^Give the file to write: %memory export notes\.jsonl \(or Markdown "),
    ("memory import", r"^Give the file to import: %memory import notes\.jsonl \(one that "),
    ("forget", "Give the id of the note to forget"),
    ("forget abc", "'abc' is not a note id"),
    ("forget 99", "No note #99"),
    ("memory frobnicate", "Unknown %memory command 'frobnicate'"),
    ("memory history", "Give one note id"),
    # An option after the ids was "'--yes' is not a note id".
    ("forget --purge 99 --yes", r"^--yes came after the ids: options go before them "),
    ("memory refute 99", r"^No note #99"),  # not "say why it is refuted" first
    ("recall -k question UTC", r"^-k is how many notes to show; for a kind: --kind question$"),
    ("memory list --order sideways", r"^Unknown order 'sideways'; use newest, oldest or prior"),
    ("memory list --offset -1", r"^offset must be at least 0 and at most "),
    ("memory browse --offset 5", r"^%memory browse pages through the newest notes itself; "),
    ("snapshot", "Give the snapshot a name"),
    ("snapshot --list --diff base", "--list takes nothing else: %snapshot --list"),
    ("recall gadgets --as-of before -k 2", "^Options go before the query: --as-of came after "
                                           "it, where it would be searched for as a word. Put "
                                           "it first \\(%recall --as-of ... QUERY\\), or -- "),
    ("snapshot --list -m why", "^-m is the message of a new snapshot; --list takes none: "),
    ("snapshot --diff a -m why", "^-m is the message of a new snapshot; --diff takes none: "),
])
def test_errors_are_one_line_usage_errors(ip, line, message):
    run(ip, "remember a finding")  # a store to recall from
    with pytest.raises(UsageError, match=message):
        run(ip, line)


@pytest.mark.parametrize("setting", ["k = 0", "similar = -5", "min_score = 5",
                                     "idle_timeout = -5", "ambient_dense = 7",
                                     "ambient_keyword = -1", "ambient_cluster_size = -3"])
def test_settings_out_of_range_are_refused_when_set(ip, setting, caplog):
    name = setting.split()[0]
    before = getattr(ip.magics_manager.registry["NbMemory"], name)
    ip.run_line_magic("config", f"NbMemory.{setting}")  # %config logs what it refused
    assert f"The value of the '{name}' trait of a NbMemory instance should not be" in caplog.text
    assert getattr(ip.magics_manager.registry["NbMemory"], name) == before


def test_forgetting_several_notes_suggests_one_undo_that_works_when_pasted(ip):
    for text in ("first finding", "second finding", "third finding"):
        run(ip, f"remember {text}")
    _, out = run(ip, "forget 1 2 3")
    assert out.stdout.strip() == "Forgot #1, #2, #3. Undo with: %memory reinstate 1 2 3"
    _, out = run(ip, out.stdout.strip().split("Undo with: %")[1])
    assert out.stdout.strip() == "Reinstated #1, #2, #3."


def test_a_note_named_twice_is_forgotten_and_reinstated_once(ip):
    run(ip, "remember the watcher races the lock")
    _, out = run(ip, "forget 1 1")
    assert out.stdout.strip() == "Forgot #1. Undo with: %memory reinstate 1"
    with pytest.raises(UsageError, match=r"^Note #1 is already forgotten; %memory reinstate 1 "
                                         r"brings it back\.$"):
        run(ip, "forget 1")
    _, out = run(ip, "memory reinstate 1 1")
    assert out.stdout.strip() == "Reinstated #1."
    assert [e.type for e in ip.magics_manager.registry["NbMemory"].mem.history(1)] == [
        "created", "revoked", "reinstated"]


def test_forget_and_reinstate(ip):
    run(ip, "remember the watcher races the lock")
    _, out = run(ip, "forget #1")
    assert out.stdout.strip() == "Forgot #1. Undo with: %memory reinstate 1"
    assert len(run(ip, "recall watcher")[0]) == 0
    _, out = run(ip, "memory reinstate 1")
    assert out.stdout.strip() == "Reinstated #1."
    assert len(run(ip, "recall watcher")[0]) == 1


def test_recall_by_keywords_alone(ip):
    run(ip, "remember orders.amount is stored in cents")
    run(ip, "remember the warehouse is rebuilt nightly")
    hits, _ = run(ip, "recall --mode lexical --min-score 0 cents")
    assert [h.note.id for h in hits] == [1]
    hits, _ = run(ip, "recall --mode dense --min-score 0 cents")
    assert len(hits) == 2


def test_memory_status_says_where_and_why(ip, store_dir):
    run(ip, "remember a finding")
    run(ip, "recall --min-score 0.9 nothing matches zzzz")
    _, out = run(ip, "memory")
    text = out.stdout
    assert f"store          {store_dir} (given explicitly)" in text
    assert "1 active" in text
    assert "empty recalls  0/0" not in text


def test_memory_list_and_history(ip):
    run(ip, "remember -t a first")
    run(ip, "remember -t b second")
    run(ip, "forget 1")
    _, out = run(ip, "memory list -t b")
    assert "1 active note\n" in out.stdout
    _, out = run(ip, "memory list --status active,revoked")  # as its help says
    assert "2 active or revoked notes\n" in out.stdout
    _, out = run(ip, "memory list --status active,revoked -n 1")  # and how to see the rest
    assert out.stdout.rstrip().endswith("(1 more: -n 2 lists them all)")
    _, out = run(ip, "memory list --status active,revoked -n 1 --order oldest")  # as the CLI
    assert "#1 " in out.stdout and "#2 " not in out.stdout
    _, out = run(ip, "memory list --status active,revoked -n 1 --offset 1")
    assert "#1 " in out.stdout and "more:" not in out.stdout
    _, out = run(ip, "memory list --offset 1")
    assert out.stdout == "Nothing past 1 active note (--offset 1).\n"
    _, out = run(ip, "memory history 1")
    text = out.stdout
    assert "created" in text and "revoked" in text
    with pytest.raises(UsageError, match="Cannot verify note #1: it is forgotten"):
        run(ip, "memory verify 2 1")  # one refused: none verified
    assert "verified" not in run(ip, "memory history 2")[1].stdout


def test_snapshot_seal_and_list(ip):
    run(ip, "remember a finding")
    _, out = run(ip, 'snapshot before-refactor -m "all good"')
    assert "Sealed snapshot 'before-refactor'" in out.stdout
    _, out = run(ip, "snapshot --list")
    assert "before-refactor" in out.stdout
    with pytest.raises(UsageError, match="already exists"):
        run(ip, "snapshot before-refactor")


def test_config_changes_settings(ip):
    for i in range(8):
        run(ip, f"remember lock finding {i}")
    ip.run_line_magic("config", "NbMemory.k = 2")
    assert len(run(ip, "recall lock finding")[0]) == 2
    _, out = run(ip, "memory settings")
    assert re.search(r"^NbMemory\.k += 2$", out.stdout, re.M)
    assert re.search(r"^NbMemory\.idle_timeout += None$", out.stdout, re.M)
    shown = re.findall(r"^NbMemory\.(\w+) += ", out.stdout, re.M)
    assert sorted(shown) == sorted(NbMemory.class_trait_names(config=True))
    assert {"team_store", "check_budget", "ambient_dense"} <= set(shown)
    with pytest.raises(UsageError, match="%memory settings takes nothing after it"):
        run(ip, "memory settings extra junk")


def test_help_is_available(ip):
    doc = ip.magics_manager.registry["NbMemory"].remember.__doc__
    assert "-p PRIORITY, --priority PRIORITY" in doc and "%%remember" in doc
    assert "the finding itself; in %%remember the cell body" in doc


def test_split_options_stops_at_text():
    parser = NbMemory.remember.parser
    args, text = split_options(parser, "-p high -t a,b -- -1 is a sentinel")
    assert (args.priority, args.tags, text) == ("high", "a,b", "-1 is a sentinel")
    args, text = split_options(parser, "--kind=gotcha x -p low")
    assert (args.kind, text) == ("gotcha", "x -p low")


def test_a_recall_that_filters_found_nothing_names_the_filters(ip):
    from IPython.lib.pretty import pretty

    run(ip, "remember -t orders orders.amount is in cents")
    hits, _ = run(ip, "recall -t nosuchtag --fresh orders")
    assert pretty(hits) == "No notes match 'orders' with -t nosuchtag --fresh."
    assert "with <code>-t nosuchtag --fresh</code>." in hits._repr_html_()
    assert pretty(run(ip, "recall nothing like it zzz")[0]).startswith("No notes match 'nothing")


def test_short_options_take_an_attached_value_as_argparse_does(ip):
    args, text = split_options(NbMemory.remember.parser, "-phigh -twal,cache the loader runs at 2")
    assert (args.priority, args.tags, text) == ("high", "wal,cache", "the loader runs at 2")
    args, query = split_options(NbMemory.recall.parser, "-k1 codename")
    assert (args.k, query) == (1, "codename")
    # A value that starts with a dash is the option's value, not another option.
    args, query = split_options(NbMemory.recall.parser, "--min-score -0.5 -t=-x codename")
    assert (args.min_score, args.tags, query) == (-0.5, "-x", "codename")
    args, text = split_options(NbMemory.remember.parser, "--about=-raw.csv -- -x flag")
    assert (args.about, text) == (["-raw.csv"], "-x flag")
    with pytest.raises(UsageError, match=r"^Unknown priority 't'"):  # -pt is -p t
        run(ip, "remember -k gotcha -t wal -pt high mistyped flag")
    assert run(ip, "memory list")[1].stdout.startswith("0 active notes")
    with pytest.raises(UsageError, match=r"^Unknown option --x1; see the help with \?"):
        run(ip, "recall --x1 codename")
    _, out = run(ip, "remember -xyz is a flag of the tool")  # not an option: the note's text
    assert "Remembered #1" in out.stdout


def test_tags_with_a_space_after_a_comma_are_refused_not_read_as_text(ip):
    for line in ("remember -t x, y spaced after comma", "recall --tags=x, y query"):
        option = "-t" if " -t " in f" {line}" else "--tags"
        with pytest.raises(UsageError, match=(
                rf"^Tags end at the first space, and {option} x, ends with a comma: give them "
                r'without spaces \(-t a,b\) or quoted \(-t "a, b"\); nothing was done\.$')):
            run(ip, line)
    with pytest.raises(UsageError, match=r"^No store at .* yet"):  # nothing was written
        run(ip, "memory list")
    _, out = run(ip, 'remember -t "x, y" spaced after comma')
    assert "Remembered #1 (finding, medium) [x, y]" in out.stdout


def test_browse_reads_its_filters_as_list_does(ip):
    pytest.importorskip("ipywidgets")
    run(ip, "remember -k gotcha -p high amounts are in cents")
    browser, _ = run(ip, "memory browse --kind Gotcha -p h")  # as %memory list reads them
    assert (browser.kind.value, browser.priority.value) == ("gotcha", "high")
    assert [n.text for n in browser.rows] == ["amounts are in cents"]
    for line, message in (
            ("memory browse --kind bogus", r"^Unknown kind 'bogus'; use one of: "),
            ("memory browse -n -1", r"^-n is how many notes to show: at least 1 \(got -1\)"),
            ("memory browse --kind gotcha,finding",
             r"^%memory browse filters by one kind and one priority; %memory list takes "
             r"several \(--kind a,b\)\.$")):
        with pytest.raises(UsageError, match=message):
            run(ip, line)


def test_an_option_given_twice_is_refused_not_half_kept(ip):
    with pytest.raises(UsageError, match=r"^Option --check was given twice; it takes one value "
                                         r"\(join two checks with and\)\.$"):
        run(ip, 'remember --check "1 == 1" --check "2 == 2" two checks')
    with pytest.raises(UsageError, match=r"^Option --priority was given twice; it takes one "
                                         r"value\.$"):
        run(ip, "remember -phigh --priority low the loader runs at 2")
    with pytest.raises(UsageError, match=r"^Option --tags was given twice; it takes one value "
                                         r"\(several tags: -t a,b\)\.$"):
        run(ip, "recall -t orders -t wal loader")
    with pytest.raises(UsageError, match=r"^No store at .* yet"):  # nothing was written
        run(ip, "memory list")
    ip.run_line_magic("config", "NbMemory.check_budget = -1")  # IPython logs the refusal
    assert ip.magics_manager.registry["NbMemory"].check_budget == 1.0
    with pytest.raises(InvalidInput, match=r"^A check's budget is a number of seconds above 0 "
                                           r"and at most 600, not 1000000000000\.0\.$"):
        evaluate("1 == 1", {}, budget=1e12)


def test_options_typed_after_a_note_are_refused_not_stored_as_its_words(ip):
    """'%remember the refunds table lags by one day -p high -t refunds' stored the options
    as the note's last words, at medium priority and with no tag."""
    with pytest.raises(UsageError, match=r"^Options go before the note: -p high -t refunds came "
                                         r"after it, where it would be stored as its words\. Put "
                                         r"them first \(%remember -p high -t refunds \.\.\.\), or "
                                         r"-- before a note that ends with them; nothing was "
                                         r"stored\.$"):
        run(ip, "remember the refunds table lags by one day -p high -t refunds")
    for typed in ("--kind gotcha", "--supersedes 1", "--priority=high --tags=wal",
                  "--about data/orders.csv", "--check 'rows > 0'", "-p HIGH"):
        with pytest.raises(UsageError, match=f"^Options go before the note: {re.escape(typed)} "
                                             "came after it"):
            run(ip, f"remember -t wal the loader drops late rows {typed}")
    # Every option of %remember is known there, with what its value looks like.
    from nbmemory.magic_args import _TRAILING
    options = {o for a in ip.magics_manager.registry["NbMemory"].remember.parser._actions
               for o in a.option_strings} - {"-h", "--help"}
    assert options == set(_TRAILING)
    # A note that ends in a command's own flags, or after --, is kept as typed.
    for line in ("remember the diff of a commit: git log -p",
                 "remember run the slow tests with pytest -k slow",
                 "remember -- the refunds table lags -p high"):
        run(ip, line)
    texts = [n.text for n in ip.magics_manager.registry["NbMemory"].mem.notes().notes]
    assert texts == ["the refunds table lags -p high", "run the slow tests with pytest -k slow",
                     "the diff of a commit: git log -p"]


def test_snapshot_diff_and_recall_as_of(ip):
    run(ip, "remember -k gotcha -t cache the cache is never invalidated")
    run(ip, "snapshot before")
    _, out = run(ip, "remember --supersedes 1 the cache is invalidated on every commit")
    assert out.stdout.startswith("Remembered #2 (gotcha, medium) [cache], replacing #1\n")
    assert [(n.kind, n.tags) for n in run(ip, "recall cache invalidated")[0].notes] == [
        ("gotcha", ("cache",))]
    _, out = run(ip, "snapshot --diff before")
    assert "From 'before' to 'now'" in out.stdout
    assert "Added (1):\n  #2 the cache is invalidated on every commit" in out.stdout
    assert "Superseded (1):\n  #1 [by #2] the cache is never invalidated" in out.stdout
    then, _ = run(ip, "recall --as-of before cache invalidated")
    now, _ = run(ip, "recall cache invalidated")
    assert [h.note.id for h in then] == [1] and [h.note.id for h in now] == [2]
    assert str(then).startswith("As of snapshot 'before':\n#1 ")  # which past it shows
    assert then._repr_html_().startswith('<p class="nbm-muted">As of snapshot &#x27;before&#x27;')
    assert "As of" not in str(now)
    with pytest.raises(UsageError, match="No snapshot named 'nope'"):
        run(ip, "snapshot --diff nope")
    with pytest.raises(UsageError, match="Give one or two snapshot names"):
        run(ip, "snapshot --diff")


def test_purge_asks_for_confirmation(ip, monkeypatch):
    run(ip, "remember my api key is abc123")
    monkeypatch.setattr("builtins.input", lambda prompt: "no")
    _, out = run(ip, "forget --purge 1")
    assert "Nothing purged." in out.stdout

    def no_stdin(prompt):  # what ipykernel does under nbclient or papermill
        raise StdinNotImplementedError("raw_input was called, but this frontend does not "
                                       "support input requests.")

    monkeypatch.setattr("builtins.input", no_stdin)
    _, out = run(ip, "forget --purge 1")
    assert out.stdout.strip() == ("Nothing purged: this front end cannot ask. Confirm with "
                                  "%forget --purge --yes 1")
    assert run(ip, "recall api key")[0][0].note.id == 1
    monkeypatch.setattr("builtins.input", lambda prompt: "purge")
    _, out = run(ip, "forget --purge 1")
    assert "Purged #1: text and vectors erased." in out.stdout
    assert len(run(ip, "recall api key")[0]) == 0
    _, out = run(ip, "memory history 1")
    assert "purged" in out.stdout
    _, out = run(ip, "memory list --status purged")
    title, header, text = out.stdout.splitlines()
    assert header.startswith("#1  ") and header.endswith("PURGED") and text == "     (text erased)"
    monkeypatch.setattr("builtins.input", lambda prompt: pytest.fail("asked again"))
    with pytest.raises(UsageError, match=r"^Already purged: #1\. Nothing was erased\.$"):
        run(ip, "forget --purge 1")


def test_export_and_import_magics(ip, tmp_path):
    run(ip, "remember -t orders orders.amount is in cents")
    _, out = run(ip, f"memory export {tmp_path / 'all.jsonl'}")
    assert f"Exported 1 note, 1 journal event and 0 snapshots to {tmp_path / 'all.jsonl'}." in out.stdout
    _, out = run(ip, f"memory export --markdown {tmp_path / 'md'}")
    assert "Wrote 2 Markdown pages" in out.stdout
    assert (tmp_path / "md" / "orders.md").exists()
    _, out = run(ip, f"memory import {tmp_path / 'all.jsonl'}")
    assert out.stdout.strip() == f"Imported {tmp_path / 'all.jsonl'}: 0 added, 1 skipped (already here)."
    with pytest.raises(UsageError, match="is not an nbmemory export"):
        (tmp_path / "x.jsonl").write_text("{}\n")
        run(ip, f"memory import {tmp_path / 'x.jsonl'}")
    spaced = tmp_path / "my notes.jsonl"  # quoted, as a shell would take it
    _, out = run(ip, f'memory export "{spaced}"')
    assert out.stdout.strip().endswith(f"to {spaced}.") and spaced.exists()
    _, out = run(ip, f"memory import '{spaced}'")
    assert out.stdout.startswith(f"Imported {spaced}: 0 added")


def test_history_shows_the_supersede_chain(ip):
    run(ip, "remember first take")
    run(ip, "remember --supersedes 1 second take")
    _, out = run(ip, "memory history 1")
    assert "superseded_by" in out.stdout
    assert "Supersede chain: #1 (superseded) -> #2 (active)" in out.stdout


def test_purging_a_correction_says_how_to_bring_back_what_it_replaced(ip):
    run(ip, "remember the churn window is 30 days")
    run(ip, "remember --supersedes 1 the churn window is 45 days")
    _, out = run(ip, "forget --purge --yes 2")
    assert out.stdout.splitlines()[1:] == [
        "#1, which #2 replaced, stays replaced; bring it back with: %memory reinstate 1"]
    run(ip, "memory reinstate 1")
    assert [h.note.id for h in run(ip, "recall churn window")[0]] == [1]


def test_store_set_in_config_before_load(store_dir):
    from traitlets.config import Config

    InteractiveShell.clear_instance()
    config = Config()
    config.NbMemory.store = str(store_dir)
    shell = InteractiveShell.instance(config=config, history_length=0)
    try:
        shell.run_line_magic("load_ext", "nbmemory")
        assert shell.magics_manager.registry["NbMemory"].store == str(store_dir)
        shell.run_line_magic("reload_ext", "nbmemory")
    finally:
        shell.run_line_magic("unload_ext", "nbmemory")
        InteractiveShell.clear_instance()


def test_memory_reindex_rebuilds_with_a_progress_bar(ip):
    for i in range(3):
        run(ip, f"remember finding {i} about orders.amount")
    _, out = run(ip, "memory reindex")
    assert "Rebuilt the indexes: 3 vectors (hash:64), 3 keyword documents." in out.stdout
    assert "indexing" in out.stderr and "3/3" in out.stderr
    hits, _ = run(ip, "recall orders.amount")
    assert len(hits) == 3


def test_unloading_gives_ipython_its_own_recall_back():
    shell = InteractiveShell.instance(history_length=0)

    def history_recall(name: str) -> bool:
        """Whether %name is IPython's history recall: it puts a past input on the prompt."""
        shell.rl_next_input = None
        shell.run_line_magic(name, "1")
        return shell.rl_next_input == "40 + 2"

    try:
        shell.run_cell("40 + 2", store_history=True)
        shell.run_line_magic("load_ext", "nbmemory")
        try:
            assert type(shell.magics_manager.magics["line"]["recall"].__self__).__name__ == \
                "NbMemory"
            assert "rep" in shell.magics_manager.lsmagic()["line"]
            # %rep is IPython's history recall still (its alias would follow %recall to ours).
            assert history_recall("rep")
        finally:
            shell.run_line_magic("unload_ext", "nbmemory")
        assert history_recall("recall") and history_recall("rep")
        assert "remember" not in shell.magics_manager.magics["line"]
        shell.run_line_magic("load_ext", "nbmemory")  # and loading again works
        shell.run_line_magic("unload_ext", "nbmemory")
        assert history_recall("recall") and history_recall("rep")
    finally:
        InteractiveShell.clear_instance()


def test_notebook_output_reads_left_to_right_and_stays_short(ip):
    from nbmemory.display import hits_html, remembered_display

    run(ip, "remember the watcher thread races acquire_lock at startup")
    html_out = hits_html(run(ip, "recall watcher")[0])
    # JupyterLab's own rule (.jp-RenderedHTMLCommon td) right-aligns cells unless ours is
    # as specific; ages and ids must not wrap ("1 / min").
    assert ".jp-RenderedHTMLCommon .nbm-table td" in html_out and "text-align:left" in html_out
    assert ".nbm-table td:not(:last-child){white-space:nowrap}" in html_out
    for i in range(20):
        run(ip, f"remember the watcher thread races acquire_lock at startup, case {i}")
    _, out = run(ip, "remember the watcher thread races acquire_lock at startup, last case")
    assert len(out.stdout) < 300, out.stdout  # one line about similar notes, not a paragraph
    assert "About: its cell" not in out.stdout
    note = ip.magics_manager.registry["NbMemory"].mem.get(1)
    shown = remembered_display(note, ip.magics_manager.registry["NbMemory"].mem.similar(1))
    assert "<details>" in shown._repr_html_()


def test_a_quoted_snapshot_message_is_stored_without_its_quotes(ip):
    run(ip, "remember a finding")
    _, out = run(ip, 'snapshot first -m "a message with spaces"')
    assert out.stdout.strip() == "Sealed snapshot 'first' at journal position 2 (1 active note)."
    assert ip.magics_manager.registry["NbMemory"].mem.snapshots()[0].message == \
        "a message with spaces"


def test_snapshot_names_lose_their_quotes_and_the_message_is_the_rest_of_the_line(ip):
    run(ip, "remember a finding")
    _, out = run(ip, "snapshot 'quoted' -m first session, before the join")
    assert out.stdout.startswith("Sealed snapshot 'quoted' at journal position 2")
    assert ip.magics_manager.registry["NbMemory"].mem.snapshots()[0].message == \
        "first session, before the join"
    _, out = run(ip, "snapshot --diff quoted now")  # "now" as the diff's header calls it
    assert "From 'quoted' to 'now'" in out.stdout
    with pytest.raises(UsageError, match="Give the snapshot a name: %snapshot NAME"):
        run(ip, 'snapshot ""')
    with pytest.raises(UsageError, match="without spaces, quotes or control characters"):
        run(ip, 'snapshot it\'s')


def test_a_snapshot_message_may_come_before_the_name(ip):
    run(ip, "remember a finding")
    run(ip, 'snapshot -m "after cleaning" after-cleaning')
    run(ip, "snapshot -m msg snapA")
    run(ip, 'snapshot --message="x y" snapB')
    assert [(s.name, s.message) for s in ip.magics_manager.registry["NbMemory"].mem.snapshots()] \
        == [("after-cleaning", "after cleaning"), ("snapA", "msg"), ("snapB", "x y")]
    with pytest.raises(UsageError, match=r"^Put a message of more than one word in quotes, or "
                                         r"after the name: %snapshot NAME -m only a message$"):
        run(ip, "snapshot -m only a message")


def test_open_questions_are_searched_with_no_other_kind(ip):
    """Said alike with a query or without (as the CLI says it), and --kind question is what
    --open means."""
    for line in ("recall --open --kind finding rows", "recall --open --kind finding"):
        with pytest.raises(UsageError, match=r"^--open searches the open questions: leave "
                                             r"--kind out$"):
            run(ip, line)
    run(ip, "remember -k question does the join drop rows?")
    run(ip, "recall --open --kind question")


def test_a_minimum_score_of_zero_is_an_option_given(ip):
    """0 == False: a check by value took --min-score 0 for no option and listed the open
    questions as if it had not been typed."""
    run(ip, "remember -k question does the join drop rows?")
    with pytest.raises(UsageError, match=r"^%recall --open with no query lists the open "
                                         r"questions; --min-score applies only to a query"):
        run(ip, "recall --open --min-score 0")


def test_a_query_that_holds_an_option_word_is_searched_after_double_dash(ip):
    run(ip, "remember grep -k is not an option; grep -i ignores case")
    hits, _ = run(ip, "recall -- what does grep -k do")
    assert [h.note.id for h in hits] == [1]


def test_a_mistyped_store_is_not_made_by_a_recall(ip, tmp_path):
    """As the CLI: a store is made only in a folder that exists, so a typo in NbMemory.store
    is said, not answered with an empty memory ("No notes match")."""
    def refusal(typo, line="recall anything"):
        ip.run_line_magic("config", f"NbMemory.store = {str(typo)!r}")
        with pytest.raises(UsageError) as caught:
            run(ip, line)
        assert not typo.exists()
        return str(caught.value)

    typo = tmp_path / "projcet" / ".nbmemory"
    assert refusal(typo) == (f"Cannot create the store {typo}: {typo.parent} does not exist. "
                             "Check NbMemory.store (a typo?), or make the directory first.")
    typo = tmp_path / ".nbmemroy"  # its folder exists: a read still makes no store there
    assert refusal(typo) == (f"No store at {typo} yet (NbMemory.store), so nothing to recall: "
                             "check it for a typo. %remember creates the store there.")
    # Nor does a listing: it answered "0 active notes: none." and made the store.
    for line, doing in (("memory list", "list"), ("memory", "show"), ("memory stale", "check"),
                        ("snapshot --list", "list"), ("memory browse", "browse"),
                        ("recall --open", "read"), ("forget 1", "read"),
                        ("memory check", "read"), ("recall --stale", "read")):
        assert refusal(typo, line).startswith(f"No store at {typo} yet (NbMemory.store), so "
                                              f"nothing to {doing}: check it for a typo."), line
    run(ip, "remember the first finding")
    assert [h.note.text for h in run(ip, "recall first finding")[0]] == ["the first finding"]


def test_the_first_magic_says_it_starts_the_memory_service(tmp_path, monkeypatch):
    """No silent wait: the cell that starts an owner says so under itself (stderr)."""
    monkeypatch.chdir(tmp_path)
    shell = InteractiveShell.instance(history_length=0)
    try:
        shell.run_line_magic("load_ext", "nbmemory")
        shell.run_line_magic("config", f"NbMemory.store = {str(tmp_path / 'store')!r}")
        shell.run_line_magic("config", "NbMemory.model = 'hash:64'")
        with capture_output() as first:
            shell.run_cell("%remember the export runs at 02:00")
        with capture_output() as second:
            shell.run_cell("%recall export")
        assert first.stderr == (f"nbmemory: starting the memory service for {tmp_path / 'store'} "
                                "(it loads the embedding model once: a few seconds)\n")
        assert second.stderr == ""
    finally:
        shell.run_line_magic("unload_ext", "nbmemory")
        InteractiveShell.clear_instance()
        from nbmemory.service import stop

        stop(tmp_path / "store")


def test_a_line_ending_in_a_question_mark_is_stored_not_taken_for_help(ip):
    with capture_output() as captured:
        ip.run_cell("%remember -k question -t orders Is order_date in UTC or local time?")
        ip.run_cell("for day in ['mon']:\n    %remember did {day} load twice??\n")
    assert "Remembered #1 (question, medium) [orders]" in Shown(captured).stdout
    memory = ip.magics_manager.registry["NbMemory"].mem
    assert [n.text for n in memory.notes().notes] == [
        "did {day} load twice??", "Is order_date in UTC or local time?"]
    hits = ip.run_cell("%recall is order_date in UTC?").result
    assert [h.note.id for h in hits][:1] == [1]
    ip.run_cell("kept = %recall is order_date in UTC?")  # not IPython's help on 'UTC'
    assert [h.note.id for h in ip.user_ns["kept"]][:1] == [1]
    with capture_output() as captured:
        ip.run_cell("%remember?")  # the magic's own help, as before
    assert "Store a finding" in captured.stdout and memory.notes().total == 2
    ip.run_line_magic("unload_ext", "nbmemory")
    assert keep_question_marks not in ip.input_transformers_cleanup
    ip.run_line_magic("load_ext", "nbmemory")


def test_a_mistyped_nbmemory_home_is_not_made_by_a_read(ip, tmp_path, monkeypatch):
    typo = tmp_path / ".nbmemroy"
    ip.run_line_magic("config", "NbMemory.store = ''")
    monkeypatch.setenv("NBMEMORY_HOME", str(typo))
    with pytest.raises(UsageError, match=f"^No store at {re.escape(str(typo))} yet "
                                         r"\(NBMEMORY_HOME\), so nothing to list"):
        run(ip, "memory list")
    assert not typo.exists()
    run(ip, "remember the first finding")  # a write makes it
    assert (typo / "memory.duckdb").exists()


def test_remember_supersedes_takes_an_id_as_the_other_magics_write_it(ip):
    run(ip, "remember the export runs at 01:00")
    run(ip, "remember --supersedes #1 the export runs at 02:00")
    hits, _ = run(ip, "recall export runs")
    assert [(h.note.id, h.note.supersedes) for h in hits] == [(2, 1)]
    with pytest.raises(UsageError, match="argument --supersedes: 'one' is not a note id; ids "
                                         "are numbers like 12 or #12"):
        run(ip, "remember --supersedes one the export runs at 03:00")


def test_memory_list_and_share_read_quoted_values_as_the_other_magics_do(ip, tmp_path):
    """IPython's parser kept the quotes: -t "orders" listed nothing, --kind "gotcha" was an
    unknown kind, and a --to path with a space was cut at it."""
    run(ip, "remember -t orders,units -k gotcha amounts are in cents")
    for line in ('memory list -t "orders"', "memory list -t 'orders,units'",
                 'memory list --kind "gotcha" --status "active, revoked"'):
        assert run(ip, line)[1].stdout.startswith("1 "), line
    with pytest.raises(UsageError, match="^%memory browse shows the active notes; %memory "
                                         "list --status revoked lists the others.$"):
        run(ip, "memory browse --status revoked")
    with pytest.raises(UsageError, match="^%memory list takes options only, not 'orders'"):
        run(ip, "memory list orders")
    away = tmp_path / "my team" / "store"
    for line in (f'memory share 1 --to "{away}"', f'memory share 1 --to="{away}"'):
        with pytest.raises(UsageError) as caught:
            run(ip, line)
        assert str(away) in str(caught.value), line
    with pytest.raises(UsageError, match="^%memory share: No closing quotation in "):
        run(ip, f'memory share 1 --to "{away}')
