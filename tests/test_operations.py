"""One table says what each operation is; Memory and the engine implement exactly it."""

import inspect

import pytest

from nbmemory.engine import Engine
from nbmemory.errors import InvalidInput
from nbmemory.memory import Memory
from nbmemory.operations import OPERATIONS, operation

# Engine parameters a front end never sends: how evaluation and ambient recall call it.
ENGINE_ONLY = {"recall": {"log"}}
# Memory parameters the engine never sees: a check is evaluated in the caller's process.
FACADE_ONLY = {"remember": {"check", "namespace", "budget"}}
# Public engine methods that are not operations (lifecycle, used by the owner itself).
NOT_OPERATIONS = {"close", "warm_up", "remember_batch", "open_indexes", "writing", "set_identity",
                  "check_embedder", "embed", "catch_up", "resync", "expect_model", "embed_pending"}


def public_methods(cls) -> set[str]:
    return {name for name, value in vars(cls).items()
            if not name.startswith("_") and inspect.isfunction(value)}


def parameters(function) -> dict[str, inspect.Parameter]:
    return dict(list(inspect.signature(function).parameters.items())[1:])  # without self


def test_every_operation_is_a_method_of_memory_and_of_the_engine():
    assert set(OPERATIONS) <= public_methods(Memory)
    assert public_methods(Engine) == set(OPERATIONS) | NOT_OPERATIONS


@pytest.mark.parametrize("name", sorted(OPERATIONS))
def test_memory_and_the_engine_take_the_same_arguments(name):
    facade, engine = parameters(getattr(Memory, name)), parameters(getattr(Engine, name))
    extra = ENGINE_ONLY.get(name, set())
    assert set(facade) - FACADE_ONLY.get(name, set()) == set(engine) - extra, name
    for param in set(facade) - FACADE_ONLY.get(name, set()):
        assert facade[param].kind == engine[param].kind, (name, param)
    for param in extra:
        assert engine[param].default is not inspect.Parameter.empty, (name, param)
    if OPERATIONS[name].writes:
        assert "request_id" in facade, f"{name} writes, so it must carry a request id"
    if OPERATIONS[name].progress:
        assert "progress" in facade, name


def test_an_unknown_operation_is_refused_by_name():
    with pytest.raises(InvalidInput, match="Unknown operation 'close'"):
        operation("close")
    with pytest.raises(InvalidInput, match="Unknown operation 3"):
        operation(3)
    assert operation("recall").read and not operation("remember").read


def test_every_operation_is_named_in_words_a_user_knows():
    """Retry and lost-owner messages name the operation; the magics' own look-ups
    (variable_anchors, notes_about) must not reach a user as identifiers."""
    assert OPERATIONS["variable_anchors"].words == "a look-up of the anchored variables"
    assert OPERATIONS["remember"].words == "remember"
    assert not [op.name for op in OPERATIONS.values() if "_" in op.words]
