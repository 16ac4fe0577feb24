"""Errors name the next command; each front end writes it in its own syntax."""

import pytest

from nbmemory import syntax
from nbmemory.errors import Command, Conflict, InvalidInput, NbMemoryError, StoreLocked, from_dict
from nbmemory.memory import Memory


def revoked(note_id=3):
    return Conflict(f"Cannot edit note #{note_id}: it is revoked; reinstate it first with {{0}}.",
                    Command("reinstate", (note_id,)))


def test_each_front_end_writes_the_command_its_own_way():
    exc = revoked()
    assert str(exc) == "Cannot edit note #3: it is revoked; reinstate it first with Memory.reinstate(3)."
    assert exc.render(syntax.MAGIC).endswith("with %memory reinstate 3.")
    assert exc.render(syntax.CLI).endswith("with nbmemory reinstate 3.")
    assert exc.render(syntax.MCP).endswith("with the reinstate tool (note_id=3).")


def test_a_shell_or_an_agent_is_never_told_a_python_call():
    """The CLI and MCP told a user to run Memory.reopen(1): neither has a reopen of its own,
    so a question is reopened in a notebook. Every command a message may name is written in
    every front end's syntax."""
    refuted = Conflict("Cannot forget note #1: it is refuted; reopen it first with {0}.",
                       Command("reopen", (1,)))
    assert refuted.render(syntax.CLI).endswith("with %memory reopen 1 (in a notebook).")
    assert refuted.render(syntax.MCP).endswith("with %memory reopen 1 in a notebook.")
    named = set(syntax.MAGIC)
    for front_end in (syntax.CLI, syntax.MCP, syntax.REST):
        assert not {op for op in named if "Memory." in syntax.write(Command(op, (1,)),
                                                                     front_end)}


def test_braces_in_a_message_are_left_alone():
    exc = InvalidInput("No note matches {'response': []} or {1}; try {0}", Command("recall", ("x",)))
    assert exc.render(syntax.MAGIC) == "No note matches {'response': []} or {1}; try %recall x"
    assert str(NbMemoryError("plain {0} text")) == "plain {0} text"


def test_an_error_crosses_the_owner_socket_with_its_commands():
    back = from_dict(revoked(7).to_dict(), "(details: owner.log)")
    assert type(back) is Conflict
    assert back.render(syntax.CLI) == ("Cannot edit note #7: it is revoked; reinstate it first "
                                       "with nbmemory reinstate 7. (details: owner.log)")
    locked = from_dict(StoreLocked("Owned by pid 12.", pid=12).to_dict())
    assert isinstance(locked, StoreLocked) and locked.pid == 12
    unknown = from_dict({"type": "KeyError", "message": "'x'"})
    assert type(unknown) is NbMemoryError and str(unknown) == "The store's owner failed: KeyError: 'x'"


def test_a_notebook_is_told_the_magic_through_the_owner(tmp_path):
    with Memory.open(tmp_path / "store", model="hash:64", mode="service") as mem:
        note = mem.remember("orders.amount is in cents")
        mem.forget(note.id)
        with pytest.raises(Conflict) as caught:
            mem.forget(note.id)
    assert caught.value.render(syntax.MAGIC) == (
        f"Note #{note.id} is already forgotten; %memory reinstate {note.id} brings it back.")
