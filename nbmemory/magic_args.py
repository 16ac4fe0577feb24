"""Reading a magic's line: leading options, the rest verbatim; note ids; one place where
nbmemory's errors become IPython's UsageError (no traceback), worded for a notebook."""

from __future__ import annotations

import argparse
import os
import re
from contextlib import contextmanager

from IPython.core.error import StdinNotImplementedError, UsageError

from . import syntax
from .errors import NbMemoryError
from .models import KINDS, PRIORITIES
from .options import one_dash

_OPTION = re.compile(r"\s*(--?[A-Za-z][\w-]*)(?:=(\"[^\"]*\"|'[^']*'|\S+))?")
_VALUE = re.compile(r"\s+(\"[^\"]*\"|'[^']*'|\S+)")


def split_options(parser, line: str, expand=None, verbatim: tuple[str, ...] = (),
                  late_options: bool = True, trailing: bool = False):
    """Parse leading options with ``parser``; return (namespace, the rest verbatim).

    ``--`` ends the options explicitly, for text that itself starts with a dash. ``expand``
    fills ``{expr}`` and ``$name`` into option values as IPython fills in a magic's line
    (``--about {DATA}/orders.csv``), except for the options in ``verbatim``; the rest, a
    note or a query, is never expanded. Without ``late_options``, an option of ``parser``
    in the rest (``%recall gadgets -k 2``) is refused, not searched for as a word. With
    ``trailing``, options that end the rest with a value they take (``%remember the table
    lags -p high -t refunds``: :func:`trailing_options`) are refused, not kept as its words.
    """
    takes_value, kept, single = {}, set(), {}
    for action in parser._actions:
        for option in action.option_strings:
            takes_value[option] = action.nargs != 0
            if isinstance(action, argparse._StoreAction):  # one value: a second would win
                single[option] = action.option_strings[-1]
        if set(action.option_strings) & set(verbatim):
            kept |= set(action.option_strings)
    given: set[str] = set()
    tokens, rest, ended = [], line, False
    while True:
        match = _OPTION.match(rest)
        if not match:
            break
        option, inline = match.group(1), match.group(2)
        if option == "--":
            rest, late_options, ended = rest[match.end():], True, True
            break
        if option not in takes_value and (long := one_dash(option, takes_value)):
            raise UsageError(f"Unknown option {option}: {long} takes two dashes (or write "
                             "-- before a text that starts with a dash); nothing was done.")
        if option not in takes_value and option[:2] in takes_value and option[1] != "-":
            if not takes_value[option[:2]]:  # -pt is -p t, as argparse reads it; -xy is no flag
                raise UsageError(f"Unknown option {option}; see the help with ?")
            # -k1, -phigh, -ta,b: the value attached, up to the next space
            tail = re.match(r"\S*", rest[match.end():]).group() if inline is None else ""
            option, inline = option[:2], option[2:] + (tail if inline is None else f"={inline}")
            rest = rest[:match.end()] + rest[match.end() + len(tail):]
        if option not in takes_value:
            if option.startswith("--") or len(option) == 2:
                raise UsageError(f"Unknown option {option}; see the help with ?")
            break
        rest = rest[match.end():]
        tokens.append(option)
        if option in single:
            name = single[option]
            if name in given:
                how = {"--check": " (join two checks with and)",
                       "--tags": " (several tags: -t a,b)"}.get(name, "")
                raise UsageError(f"Option {name} was given twice; it takes one value{how}.")
            given.add(name)
        if takes_value[option]:
            if inline is None:
                value = _VALUE.match(rest)
                if not value:
                    raise UsageError(f"Option {option} needs a value")
                inline, rest = value.group(1), rest[value.end():]
            quoted = len(inline) >= 2 and inline[0] == inline[-1] and inline[0] in "\"'"
            value = inline[1:-1] if quoted else inline  # only the outer pair
            if not quoted and value.endswith(",") and single.get(option) == "--tags":
                raise UsageError(  # -t x, y: the y would be read as the text
                    f"Tags end at the first space, and {option} {value} ends with a comma: give "
                    f"them without spaces (-t a,b) or quoted (-t \"a, b\"); nothing was done.")
            value = expand(value) if expand and option not in kept else value
            if value.startswith("-"):  # --since=-7d: argparse would take -7d for an option
                tokens[-1] = f"{option}={value}" if option.startswith("--") else option + value
            else:
                tokens.append(value)
    if rest.strip().startswith("-- "):
        rest, late_options, ended = rest.strip()[3:], True, True
    late = [word for word in rest.split() if word.split("=")[0] in takes_value]
    if late and not late_options:
        raise UsageError(f"Options go before the query: {late[0]} came after it, where it would "
                         f"be searched for as a word. Put it first (%{parser.prog} {late[0]} "
                         f"... QUERY), or -- before a query that holds it.")
    typed = trailing_options(rest) if trailing and not ended else ""
    if typed:
        raise UsageError(f"Options go before the note: {typed} came after it, where it would be "
                         f"stored as its words. Put them first (%{parser.prog} {typed} ...), or "
                         f"-- before a note that ends with them; nothing was stored.")
    for option, value in zip(tokens, tokens[1:]):  # %remember's -k is a kind, %recall's not
        if option == "-k" and value in KINDS and single.get("-k") != single.get("--kind"):
            raise UsageError(f"-k is how many notes to show; for a kind: --kind {value}")
    return parser.parse_args(tokens), rest.strip()


_WORD = re.compile(r"\"[^\"]*\"|'[^']*'|\S+")
_ANY = re.compile(r"[^-].*", re.S).fullmatch
_TAG = re.compile(r"[^\s,-]\S*").fullmatch
_NUMBER = re.compile(r"#?\d+").fullmatch
_TRAILING = {  # each option of %remember: what its value looks like (None: a flag)
    "-p": lambda v: v.lower() in PRIORITIES, "-k": lambda v: v.lower() in KINDS, "-t": _TAG,
    "--supersedes": _NUMBER, "--output-of": _NUMBER, "--cells": re.compile(r"[\d,-]+").fullmatch,
    "--about": _ANY, "--check": _ANY, "--procedure": _ANY, "--from-output": None}
_TRAILING.update({"--priority": _TRAILING["-p"], "--kind": _TRAILING["-k"], "--tags": _TAG})


def trailing_options(text: str) -> str:
    """The options of %remember that end ``text``, as typed, each with a value it takes
    (``-p high -t refunds``, ``--supersedes 3``, ``--priority=high``; not ``git log -p`` or
    ``pytest -k slow``); empty if none does."""
    words = list(_WORD.finditer(text))
    start = len(text)
    while words:
        last = words[-1].group()
        option, _, inline = last.partition("=")
        if option in _TRAILING and _TRAILING[option] and inline and _TRAILING[option](inline):
            taken = 1
        elif last in _TRAILING and _TRAILING[last] is None:
            taken = 1
        elif len(words) >= 2 and (valid := _TRAILING.get(words[-2].group())) and valid(last):
            taken = 2
        else:
            break
        start = words[-taken].start()
        del words[-taken:]
    return text[start:].strip()


def about_anchors(specs, namespace, scope: str, text: str = "") -> list:
    """``--about`` values: a variable of ``namespace`` by fingerprint, else a path. A path
    with spaces typed without quotes (the rest of it began the note's ``text``) is refused,
    saying what to type."""
    from .anchors import is_glob
    from .models import Anchor
    from .values import variable_fingerprint

    about = []
    for spec in specs or ():
        spec = spec.strip()
        if spec.isidentifier() and spec in namespace:
            fingerprint = {**variable_fingerprint(namespace[spec]), "scope": scope}
            about.append(Anchor("variable", spec, fingerprint).to_dict())
            continue
        head = spec.split(".")[0]
        if head != spec and head.isidentifier() and head in namespace and not os.path.exists(spec):
            raise UsageError(f"--about {spec}: --about takes a variable or a path, and {head} is "
                             f"a variable here: --about {head} anchors the note to it (it goes "
                             f"stale when {head}'s columns, rows or value change). The note was "
                             "not stored.")
        words = text.split("\n", 1)[0].split(" ")[:8]
        spaced = [whole for whole in (" ".join([spec, *words[:n]]) for n in range(1, len(words) + 1))
                  if not os.path.exists(spec) and os.path.exists(os.path.expanduser(whole))]
        if spaced:
            quote = "'" if '"' in spaced[-1] else '"'
            raise UsageError(f"--about {spec}: a path with spaces goes in quotes: --about "
                             f"{quote}{spaced[-1]}{quote}. The note was not stored.")
        if spec.isidentifier() and not os.path.exists(spec) and not is_glob(spec):
            raise UsageError(f"--about {spec}: there is no variable {spec!r} in this kernel "
                             "and no file of that name here; run the cell that defines it "
                             "first, or give a path. The note was not stored.")
        about.append(os.path.abspath(os.path.expanduser(spec)))  # from the kernel's folder
    return about


def parse_ids(text: str) -> list[int]:
    ids = []
    for token in text.replace(",", " ").split():
        try:
            ids.append(int(token.lstrip("#")))
        except ValueError:
            if re.match(r"--?[A-Za-z]", token):
                raise UsageError(f"{token} came after the ids: options go before them "
                                 "(%forget --purge --yes 12).") from None
            raise UsageError(f"{token!r} is not a note id; ids are numbers like 12 or #12") from None
    return ids


def _id_and_text(rest: str, verb: str) -> tuple[int, str]:
    head, _, text = rest.strip().partition(" ")
    if not head:
        raise UsageError(f"Give a note id: %memory {verb} 12 [reason]")
    return parse_ids(head)[0], text.strip()


def ask(prompt: str) -> str | None:
    """The user's answer, or None in a front end that cannot ask (nbclient and papermill
    give no stdin: ipykernel raises StdinNotImplementedError, a closed stdin EOFError)."""
    try:
        return input(prompt)
    except (EOFError, StdinNotImplementedError):
        return None


@contextmanager
def usage_errors():
    try:
        yield
    except NbMemoryError as exc:
        raise UsageError(exc.render(syntax.MAGIC)) from None


def split_message(line: str) -> tuple[str, str]:
    """``NAME -m the message`` -> (``NAME``, ``the message``): after the name a message is
    the rest of the line, quoted or not, as a note's text is. Before the name (options come
    first) it is one word or one quoted phrase: ``-m "after cleaning" NAME``."""
    found = re.search(r"(?:^|\s)(?:-m|--message)(?:\s+|=)(.*)$", line, re.S)
    if not found:
        return line, ""
    before, after = line[:found.start()], found.group(1)
    if any(not token.startswith("-") for token in before.split()):
        return before, unquote(after)
    token = _VALUE.match(" " + after)
    message, rest = (token.group(1), after[token.end() - 1:]) if token else ("", "")
    if len(rest.split()) > 1 and message[:1] not in "\"'":
        raise UsageError(f"Put a message of more than one word in quotes, or after the "
                         f"name: %snapshot NAME -m {message} {rest.strip()}")
    return f"{before} {rest}", unquote(message)


def unquote(value: str) -> str:
    """``"a message"`` -> ``a message``: IPython's argument parser keeps the quotes."""
    value = (value or "").strip()
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
        return value[1:-1]
    return value


_ENDS_IN_QUESTION = re.compile(
    r"^([ \t]*(?:[\w.]+(?:[ \t]*,[ \t]*[\w.]+)*[ \t]*=[ \t]*)?)"  # hits = %recall ...?
    r"%(remember|recall|forget|snapshot|memory)[ \t]+(.*\?)[ \t]*$")


def keep_question_marks(lines: list[str]) -> list[str]:
    """An IPython input transformer: ``%remember Is order_date in UTC?`` runs the magic with
    its ``?`` instead of asking IPython for help on ``UTC`` (IPython reads a line ending in
    ``?`` as a help request, and the note was never stored); so does ``hits = %recall ...?``.
    ``%remember?`` alone still shows the help; a ``%%remember`` cell's body is left as it is."""
    if not lines or lines[0].lstrip().startswith("%%"):
        return lines
    out = []
    for at, line in enumerate(lines):
        found = _ENDS_IN_QUESTION.match(line.rstrip("\r\n"))
        continued = at > 0 and lines[at - 1].rstrip("\r\n").endswith("\\")
        if found and found.group(3).strip("? \t") and not continued:
            indent, name, rest = found.groups()
            line = f"{indent}get_ipython().run_line_magic({name!r}, {rest!r})\n"
        out.append(line)
    return out
