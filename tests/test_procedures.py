"""Procedures: only cells that ran without error are kept, and they come back as code."""

import pytest
from IPython.core.error import UsageError

from nbmemory.procedures import parse_cells, procedure_code

from test_magics import ip, run  # noqa: F401  (the shell fixture)


def cells(ip, *sources):  # noqa: F811
    for source in sources:
        ip.run_cell(source, store_history=True)


def test_only_successful_cells_are_captured_and_insert_round_trips(ip):  # noqa: F811
    cells(ip, "import math", "rows = [1, 2, 3]", "1 / 0", "%recall anything at all",
          "total = sum(rows) * math.pi")
    _, out = run(ip, "remember --procedure sum-rows --cells 1-5 -t demo how to total the rows")
    assert "Left out cells that raised an error: 3." in out.stdout
    hits, _ = run(ip, "recall --kind procedure total the rows")
    note = hits[0].note
    assert note.kind == "procedure" and note.tags == ("demo",)
    assert procedure_code(note.text) == "import math\n\nrows = [1, 2, 3]\n\ntotal = sum(rows) * math.pi"
    # What it is for comes before the code: a list of notes shows the start of a note.
    assert note.text.startswith("Procedure: sum-rows\nhow to total the rows\n\n```python\n")
    ip.rl_next_input = None
    _, out = run(ip, f"memory insert {note.id}")
    assert ip.rl_next_input == procedure_code(note.text)
    # Colab, VS Code and nbclient ignore a next input: the way to the code is said.
    assert out.stdout == (f"Put #{note.id}'s code into a new cell below (none there? "
                          f"'%memory insert --print {note.id}' prints it).\n")
    namespace = {}
    exec(ip.rl_next_input, namespace)
    assert namespace["total"] == pytest.approx(6 * 3.141592653589793)
    ip.rl_next_input = None
    _, out = run(ip, f"memory insert --print {note.id}")
    assert out.stdout == procedure_code(note.text) + "\n" and ip.rl_next_input is None


@pytest.mark.parametrize("line, message", [
    ("remember --procedure p", "A procedure needs a name and cells"),
    ("remember --procedure p --cells 9-x", "Cannot read the cells '9-x'"),
    ("remember --procedure p --cells 5-2", "The range '5-2' runs backwards"),
    ("remember --procedure p --cells 40", "No cell ran with execution count 40"),
    ("remember --procedure p --cells 1,2-99,120", r"No cell ran with execution count 3-99, 120 in "
                                                  r"this kernel \(the last was 2\)"),
    ("remember --procedure p --cells 1-99999999", "The range '1-99999999' spans 99,999,999 "
                                                  "cells; a procedure takes at most 1,000"),
    ("remember --procedure p --cells 2", "None of those cells ran without error"),
])
def test_procedure_errors(ip, line, message):  # noqa: F811
    cells(ip, "x = 1", "1 / 0")
    with pytest.raises(UsageError, match=message):
        run(ip, line)


def test_insert_refuses_notes_without_code(ip):  # noqa: F811
    run(ip, "remember just a finding")
    with pytest.raises(UsageError, match="Note #1 is a finding with no code block"):
        run(ip, "memory insert 1")


def test_parse_cells():
    assert parse_cells("3-5, 4, 9") == [3, 4, 5, 9]


def test_cells_that_ran_before_the_extension_are_left_out_and_named(ip):  # noqa: F811
    # The fixture loaded nbmemory first; pretend cell 1 ran before it, as after a late %load_ext.
    cells(ip, "import math", "radius = 2.0", "area = math.pi * radius ** 2")
    magics = ip.magics_manager.registry["NbMemory"]
    del magics._outcomes[1]
    _, out = run(ip, "remember --procedure area --cells 1-3 circle area")
    assert ("Left out cells that ran before %load_ext nbmemory, so whether they succeeded is "
            "unknown: 1. Re-run them to include them.") in out.stdout
    hits, _ = run(ip, "recall --kind procedure circle area")
    assert procedure_code(hits[0].note.text) == "radius = 2.0\n\narea = math.pi * radius ** 2"
