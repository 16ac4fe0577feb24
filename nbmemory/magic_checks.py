"""Findings that check themselves, in the notebook: ``%remember --check`` and
``--from-output``, ``%memory check``, ``trust`` and ``rerun``, and the ambient re-check
after a cell changes what a check reads. Checks run here, in the user's kernel, only."""

from __future__ import annotations

import difflib
import os
import re
import textwrap

from IPython.core.error import UsageError

from . import checks as evaluation
from .errors import NbMemoryError, StoreUnavailable
from .magic_args import ask, parse_ids, usage_errors
from .wording import counted

MAX_EVIDENCE = 4000  # characters of a cell's output kept as a note's evidence


def describe(note_id: int, expression: str, outcome: evaluation.Outcome) -> str:
    """One line per outcome, as %memory check and the ambient line print it."""
    if outcome.status == "passed":
        return f"#{note_id} holds: {expression} (value {outcome.value})"
    if outcome.status == "failed":
        return f"#{note_id} FAILS: {expression} is now False (value {outcome.value})"
    if outcome.status == "error":
        return f"#{note_id} could not be checked: {expression} {outcome.trouble}"
    return f"#{note_id} not checked: {expression} ({outcome.why})"


# A comparison's operator: no note starts with one, the rest of a check cut at a space does
# (a check cut elsewhere, ``len(df)``, gives no True or False and is refused for that).
_CONTINUES = re.compile(r"(?:[<>]=?|[=!]=)(?:\s|\w|$)")


def check_whole(line: str, check: str | None, text: str) -> None:
    """Refuse ``--check len(df) > 100 ...``: unquoted, the check ends at its first space
    and the rest of it would be stored as the note."""
    if check is None or re.search(r"--check(?:=|\s+)[\"']", line):
        return
    if _CONTINUES.match(text):
        raise UsageError(f"The check stops at its first space unless quoted: it would be "
                         f"{check!r} and the note {text[:40]!r}. Quote the check: "
                         f"%remember --check \"{check} {text.split(' ')[0]} ...\" the finding")


def evidence(shell, before: int | None = None, count: int | None = None) -> dict:
    """The result of cell ``count``, else the latest result before execution count
    ``before``, as an evidence anchor: its plain-text form, capped, and its source."""
    outputs = shell.user_ns.get("Out") or {}
    if count is not None and count not in outputs:
        raise UsageError(f"Cell [{count}] has no result in this kernel (only cells whose last "
                         "line gives a value have one); the note was not stored.")
    counts = [c for c in outputs if before is None or c < before]
    if count is None and not counts:
        raise UsageError("--from-output keeps the result of the last cell that had one, and "
                         "no cell has shown a result yet in this kernel. Run the cell whose "
                         "output is the evidence, then %remember --from-output ...")
    count = max(counts) if count is None else count
    text = shell.display_formatter.format(outputs[count], include=("text/plain",))[0]
    text = text.get("text/plain", repr(outputs[count]))
    history = shell.history_manager.input_hist_raw
    source = history[count] if count < len(history) else ""
    return {"kind": "evidence", "target": f"Out[{count}]", "origin": "evidence",
            "fingerprint": {"output": text[:MAX_EVIDENCE], "truncated": len(text) > MAX_EVIDENCE,
                            "source": source, "execution_count": count}}


class CheckCommands:
    """Mixed into :class:`~nbmemory.magics.NbMemory` (``mem``, ``shell``, ``check_budget``)."""

    def _memory_check(self, rest: str):
        ids = parse_ids(rest)
        elsewhere = []
        if not ids:  # a check reads the names of its own notebook: run those of this one
            listed = self.mem.checks()
            ids = [i["note"].id for i in listed if self._written_here(i["note"])]
            elsewhere = sorted({i["note"].id for i in listed} - set(ids))
            if not ids:
                print("No note has a check." if not elsewhere else
                      f"No check was written in this notebook; "
                      f"{counted(len(elsewhere), 'note')} in others "
                      f"({', '.join(f'#{i}' for i in elsewhere)}) "
                      f"{'has one' if len(elsewhere) == 1 else 'have them'}. "
                      f"To run them here: %memory check {' '.join(map(str, elsewhere))}")
                return
        results = self.mem.check(self.shell.user_ns, ids, budget=self.check_budget)
        self._checks_token = ()  # no store's: the ambient re-check reads the outcomes afresh
        if not results:
            print(self._no_check(ids))
            return
        for item, outcome in results:
            print(describe(item["note"].id, item["expression"], outcome))
        if any(item.get("recorded") is False for item, _ in results):
            print("Not recorded in the store: it is read-only for you (the outcomes are "
                  "yours alone).")
        if elsewhere:
            print(f"Not run: the checks of {', '.join(f'#{i}' for i in elsewhere)}, written in "
                  f"other notebooks (%memory check {' '.join(map(str, elsewhere))} runs them here).")
        untrusted = [item["note"].id for item, o in results if o.why.startswith("not trusted")]
        if untrusted:
            print(f"Read those checks first (%memory history {untrusted[0]}), then run them "
                  f"with: %memory trust {' '.join(map(str, untrusted))}")

    def _no_check(self, ids: list[int]) -> str:
        """Why none of ``ids`` ran: only an active note's check runs (a replaced note's
        successor may have one)."""
        lines, plain = [], []
        for note_id in ids:
            note = self.mem.get(note_id)
            if note.status == "superseded":
                newest = self.mem.chain(note_id)[-1]
                lines.append(f"#{note_id} was replaced by #{newest.id}: run its check with "
                             f"%memory check {newest.id}.")
            elif note.status != "active":
                lines.append(f"#{note_id} is {note.status}: only an active note's check runs.")
            else:
                plain.append(f"#{note_id}")
        if plain:
            lines.append(f"None of {', '.join(plain)} has a check (add one with %remember "
                         "--check EXPR ...).")
        return "\n".join(lines)

    def _memory_trust(self, rest: str):
        ids = parse_ids(rest)
        if not ids:
            raise UsageError("Give the id of the note whose check you read and trust: "
                             "%memory trust 12")
        listed = self.mem.checks()
        for note_id in ids:  # what is said is what is trusted, every check of the note
            read = [item["expression"] for item in listed if item["note"].id == note_id]
            if read and all(i["trusted"] for i in listed if i["note"].id == note_id):
                print(f"Already trusted: {'the checks' if len(read) > 1 else 'the check'} of "
                      f"#{note_id} as {'they read' if len(read) > 1 else 'it reads'} now "
                      f"(%memory check {note_id} runs {'them' if len(read) > 1 else 'it'}).")
                continue
            with usage_errors():
                self.mem.trust(note_id, checks=read or None)
            self._checks_token = ()  # the ambient re-check reads the trust (a reader's: here only)
            if len(read) > 1:
                print(f"Trusted the {len(read)} checks of #{note_id} (%memory check {note_id} "
                      "runs them):" + "".join(f"\n  {c}" for c in read))
            else:
                print(f"Trusted the check of #{note_id}: {''.join(read)}. %memory check "
                      f"{note_id} runs it.")

    def _memory_rerun(self, rest: str):
        words = rest.split()
        yes = "--yes" in words
        ids = parse_ids(" ".join(w for w in words if w != "--yes"))
        if len(ids) != 1:
            raise UsageError("Give one note id: %memory rerun 12 [--yes]")
        note = self.mem.get(ids[0])
        kept = next((a for a in note.anchors if a.kind == "evidence"), None)
        source = (kept.fingerprint.get("source") if kept
                  else without_magics(note.provenance.cell_source or ""))
        if not source or not source.strip():
            raise UsageError(f"Note #{note.id} has no cell to re-run: it was not written in a "
                             "notebook, or its cell held only the %remember. Keep a cell's "
                             "output with %remember --from-output to re-run that cell.")
        print(f"The cell #{note.id} came from:\n" + textwrap.indent(source.rstrip(), "    "))
        if not yes:
            answer = ask("Run it again in this kernel? [y/N] ")
            if (answer or "").strip().lower() not in ("y", "yes"):
                why = "" if answer is not None else " This front end cannot ask."
                print(f"Not run.{why} (%memory rerun {note.id} --yes runs it without asking.)")
                return
        result = self.shell.run_cell(source, store_history=True)
        new = ""
        if result.result is not None:
            new = self.shell.display_formatter.format(result.result,
                                                      include=("text/plain",))[0]["text/plain"]
        if result.error_in_exec is not None:
            new = f"{type(result.error_in_exec).__name__}: {result.error_in_exec}"
        old = kept.fingerprint.get("output", "") if kept else ""
        if not kept:
            print("The note kept no output (write it with --from-output to compare); "
                  f"the cell now gives:\n{new}")
            return
        print(side_by_side(old, new, f"then ({kept.target})", "now"))

    # -- ambient ------------------------------------------------------------------------

    def _recheck(self, names: set[str], token=None) -> list[str]:
        """Re-run the trusted checks reading any of ``names`` (which the cell just ran
        rebound or touched) when their values changed; the lines to show for those that
        fail, or hold again. ``token`` changes when the store does (refetch the checks)."""
        from .values import variable_fingerprint

        self._record_outcomes()  # those of a cell run while the store was away
        if not names:
            return []
        lines, outcomes = [], []
        for item in self._check_cache(token):
            reads = set(item["names"])
            if not item["trusted"] or not reads & names or not reads <= set(self.shell.user_ns):
                continue
            if not self._written_here(item["note"]):
                continue  # another notebook's `orders` is not the one the check is about
            seen = {n: variable_fingerprint(self.shell.user_ns[n]) for n in sorted(reads)}
            key = (item["note"].id, item["expression"])
            last = (item["last"] or {}).get("status")
            # New in this kernel: compared with the values the check held on, unless it
            # failed since (then those values may well be back: a restart, Run All).
            if seen == self._check_seen.get(key, None if last in ("failed", "error")
                                            else item["variables"]):
                continue  # touched, not changed
            self._check_seen[key] = seen
            outcome = evaluation.evaluate(item["expression"], self.shell.user_ns,
                                          budget=self.check_budget, reads=item["names"])
            if outcome.status == last and (outcome.status != "failed" or outcome.value == (
                    item["last"] or {}).get("value")):
                continue  # said already (a failure: unless its value changed)
            outcomes.append({"note_id": item["note"].id, "expression": item["expression"],
                             "auto": True, **outcome.to_dict()})
            flagged = last == "failed" or last == "error" and not item["last"].get("auto")
            if outcome.status == "failed" or (outcome.status == "passed" and flagged):
                lines.append(describe(item["note"].id, item["expression"], outcome))
        self._unrecorded = (self._unrecorded + outcomes)[-100:]
        if outcomes and not self._record_outcomes():
            return [line + " (not recorded yet: the store cannot be reached)" for line in lines]
        return lines

    def _record_outcomes(self) -> bool:
        """Journal the ambient re-check's outcomes not recorded yet (the store was away);
        False while it still cannot be reached (they wait for the next cell)."""
        if not self._unrecorded:
            return True
        try:
            self.mem.record_checks(self._unrecorded)
        except StoreUnavailable:
            return False
        except NbMemoryError:  # a reader's (not theirs to journal), or a note since forgotten
            pass
        self._unrecorded = []
        self._checks_token = ()  # no store's: the outcomes are read again next time
        return True

    def _written_here(self, note) -> bool:
        """Whether ``note`` was written in this kernel's notebook (or both outside one)."""
        return same_notebook(note.provenance.notebook or "", self._scope())

    def _check_cache(self, token) -> list[dict]:
        """The checks, read again when ``token`` (the store's) changed; while the store
        cannot be reached, as last read."""
        if self._checks is None or token != self._checks_token:
            try:
                self._checks = self.mem.checks()
            except StoreUnavailable:
                if self._checks is None:
                    raise
                return self._checks
            self._checks_token = token
        return self._checks


MAGICS = ("%remember", "%%remember", "%recall", "%forget", "%snapshot", "%memory")


def same_notebook(a: str, b: str) -> bool:
    if not a or not b:
        return a == b
    try:
        return a == b or os.path.samefile(a, b)
    except OSError:  # one of them is not there (any more)
        return False


def without_magics(source: str) -> str:
    """A cell's code without its nbmemory magics (re-running a %remember would write the
    note again); nothing at all for a %%remember cell, whose body is the note."""
    if source.lstrip().startswith("%%remember"):
        return ""
    return "\n".join(line for line in source.splitlines()
                     if not line.lstrip().startswith(MAGICS)).strip()


def side_by_side(old: str, new: str, left: str, right: str, width: int = 60) -> str:
    """Two outputs next to each other, aligned by difflib; ``*`` marks a changed line,
    ``<`` one only then, ``>`` one only now."""
    a, b = old.splitlines(), new.splitlines()
    rows = [f"{left[:width]:<{width}} | {right}", f"{'-' * width}-+-{'-' * width}"]
    changed = 0
    for op, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        mark = {"equal": "|", "replace": "*", "delete": "<", "insert": ">"}[op]
        changed += 0 if op == "equal" else max(i2 - i1, j2 - j1)
        for k in range(max(i2 - i1, j2 - j1)):
            x = a[i1 + k] if i1 + k < i2 else ""
            y = b[j1 + k] if j1 + k < j2 else ""
            rows.append(f"{x[:width]:<{width}} {mark} {y[:width]}")
    rows.append("Same output." if not changed else f"{changed} line(s) differ.")
    return "\n".join(rows)
