"""Findings that check themselves: a Python expression that must hold, evaluated only in
the user's own process (a kernel, or a script that passes its namespace), within a time
budget. Never imported by the owner, the server, the CLI or MCP to run anything.

A check is stored as an anchor of kind ``check`` (target: the expression; fingerprint: the
names it reads, the value it had and those names' fingerprints). Each re-check is a
journal event (``check_passed``, ``check_failed``, ``check_error``, ``check_skipped``);
the latest failure is a stale reason wherever the note is shown.
"""

from __future__ import annotations

import ast
import builtins
import ctypes
import signal
import sys
import threading
import time
from dataclasses import dataclass
from typing import Any, Mapping

from .errors import InvalidInput
from .models import Anchor
from .values import variable_fingerprint

DEFAULT_BUDGET = 1.0  # seconds a check may run
MAX_BUDGET = 600.0  # a check holds the kernel while it runs: ten minutes at most
MAX_VALUE = 200  # characters of a value kept
STOP_WAIT = 1.0  # seconds a check off the main thread gets to stop once told to


_PAST_BUDGET = "ran past its budget"


class CheckTimeout(BaseException):
    """A check ran past its budget. A BaseException, as KeyboardInterrupt is: the checked
    code's own ``except Exception`` (a retry loop) must not swallow it."""


@dataclass(frozen=True)
class Outcome:
    """What one evaluation gave: passed, failed, error or skipped, and why."""

    status: str
    value: str = ""  # repr of the value (capped)
    error: str = ""  # the exception line, for an error
    why: str = ""  # for skipped
    gave: str = ""  # the type of a value that is not True or False (kept out of the journal)

    def to_dict(self) -> dict[str, str]:
        return {k: v for k, v in self.__dict__.items() if v and k != "gave"}

    @property
    def trouble(self) -> str:
        """What kept an error from giving a value, to follow the expression in a sentence."""
        return self.error if self.error.startswith(_PAST_BUDGET) else f"raised {self.error}"


def parse(expression: str) -> ast.Expression:
    from .errors import InvalidInput

    if not isinstance(expression, str) or not expression.strip():
        raise InvalidInput("A check is a Python expression that must hold, e.g. "
                           "--check \"orders.amount.isna().mean() < 0.05\"")
    try:
        return ast.parse(expression.strip(), mode="eval")
    except SyntaxError as exc:
        raise InvalidInput(f"The check {expression!r} is not a Python expression "
                           f"({exc.msg}); the note was not stored.") from None


def names_read(expression: str, namespace: Mapping[str, Any] | None = None) -> list[str]:
    """The free names an expression reads, in order of appearance; builtins left out unless
    ``namespace`` defines them (a DataFrame called ``input`` is the check's data)."""
    tree = parse(expression)
    bound = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)
             and isinstance(n.ctx, ast.Store)}  # comprehension and walrus targets
    bound |= {n.arg for n in ast.walk(tree) if isinstance(n, ast.arg)}  # lambda parameters
    loads = sorted((n for n in ast.walk(tree) if isinstance(n, ast.Name)
                    and isinstance(n.ctx, ast.Load) and n.id not in bound),
                   key=lambda n: (n.lineno, n.col_offset))
    names = [n.id for n in loads]
    return [n for n in dict.fromkeys(names)
            if not hasattr(builtins, n) or namespace is not None and n in namespace]


def _short(value: Any) -> str:
    if type(value).__module__ == "numpy" and getattr(value, "shape", None) == ():
        value = value.item()  # 0.081, not np.float64(0.081)
    shape = getattr(value, "shape", None)
    if isinstance(shape, tuple) and shape and all(isinstance(n, int) for n in shape):
        return f"{type(value).__name__} {'×'.join(map(str, shape))}"  # not its rows, cut
    try:
        text = " ".join(repr(value).split())
        if isinstance(value, float) and len(text) > 10 and abs(value) < 1e6:
            text = f"{value:.6g}"  # 0.333333, not 0.3333333333333333
    except Exception as exc:  # noqa: BLE001 - a value whose repr fails is still a value
        text = f"<{type(value).__name__}: repr failed: {exc}>"
    return text if len(text) <= MAX_VALUE else text[:MAX_VALUE - 1] + "…"


def evaluate(expression: str, namespace: Mapping[str, Any], *,
             budget: float = DEFAULT_BUDGET, reads: list[str] | None = None) -> Outcome:
    """Evaluate ``expression`` in ``namespace`` within ``budget`` seconds; ``reads``: the
    names it was stored as reading (a builtin's name among them is the user's variable).

    The value kept is the one worth reading: for a comparison its first side that is not a
    constant (the null share in ``orders.amount.isna().mean() < 0.05`` or in ``0 <= ... <
    0.3``), else the expression's value. An
    exception inside the check is an outcome, not a traceback; so is running past the
    budget. In the main thread on POSIX the check is interrupted (SIGALRM); elsewhere (other
    threads, Windows) it runs in a helper thread that is stopped the same way when the
    budget ends, or left running if it is inside a call into C, so the caller's own work
    goes on either way.
    """
    if isinstance(budget, bool) or not isinstance(budget, (int, float)) \
            or not 0 < budget <= MAX_BUDGET:
        raise InvalidInput(f"A check's budget is a number of seconds above 0 and at most "
                           f"{MAX_BUDGET:g}, not {budget!r}.")
    run = _runner(parse(expression), namespace)
    missing = [n for n in (names_read(expression, namespace) if reads is None else reads)
               if n not in namespace]
    if missing:
        return Outcome("skipped", why=f"{', '.join(missing)} not defined here")
    if hasattr(signal, "setitimer") and threading.current_thread() is threading.main_thread():
        return _with_alarm(run, budget)
    return _in_thread(run, budget)


def _runner(tree: ast.Expression, namespace: Mapping[str, Any]):
    """A function giving (value, shown): a comparison's first side that is not a constant
    is evaluated once and kept, so ``x < 0.05`` and ``0 <= x < 0.3`` report ``x``."""
    body = tree.body
    if not isinstance(body, ast.Compare):
        code = compile(tree, "<check>", "eval")

        def whole():
            value = eval(code, dict(namespace))  # noqa: S307 - the user's own check, here
            return value, value
        return whole
    sides = [body.left, *body.comparators]
    at = next((i for i, side in enumerate(sides) if not isinstance(side, ast.Constant)), 0)
    side = compile(ast.Expression(sides[at]), "<check>", "eval")
    sides[at] = ast.Name(_SHOWN, ast.Load())
    rest = ast.Expression(ast.Compare(sides[0], body.ops, sides[1:]))
    compare = compile(ast.fix_missing_locations(ast.copy_location(rest, tree)), "<check>", "eval")

    def compared():
        scope = dict(namespace)
        scope[_SHOWN] = shown = eval(side, scope)  # noqa: S307 - as above
        return eval(compare, scope), shown  # noqa: S307
    return compared


_SHOWN = "_nbmemory_check_shown"


def _result(value: Any, shown: Any) -> Outcome:
    try:
        held = bool(value)
    except Exception as exc:  # noqa: BLE001 - e.g. the truth value of a Series
        return Outcome("error", error=f"{type(exc).__name__}: {exc}".splitlines()[0][:MAX_VALUE])
    boolean = type(value).__name__ in ("bool", "bool_")  # numpy's too, without importing it
    return Outcome("passed" if held else "failed", value=_short(shown),
                   gave="" if boolean else type(value).__name__)


def _error(exc: BaseException, budget: float, took: float = 0.0) -> Outcome:
    if isinstance(exc, CheckTimeout):
        late = (f" (stopped after {took:.1f} s: a call into C, such as sum() or a pandas "
                f"method, is only stopped once it returns)") if took > max(2 * budget, budget + 0.2) else ""
        return Outcome("error", error=f"{_PAST_BUDGET} of {budget:g} s{late}")
    return Outcome("error", error=f"{type(exc).__name__}: {exc}".splitlines()[0][:MAX_VALUE])


def _with_alarm(run, budget: float) -> Outcome:
    done = []

    def stop(signum, frame):
        if not done:
            _stop_at_the_next_line(frame, done)
            raise CheckTimeout()

    previous = signal.signal(signal.SIGALRM, stop)
    pending, interval = signal.setitimer(signal.ITIMER_REAL, budget)
    began, tracing = time.monotonic(), sys.gettrace()
    try:
        try:
            value, shown = run()
        finally:
            done.append(True)
            sys.settrace(tracing)
    except BaseException as exc:  # noqa: BLE001 - every failure of a check is an outcome
        if isinstance(exc, KeyboardInterrupt):
            raise
        return _error(exc, budget, time.monotonic() - began)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        if pending:  # someone else's alarm (a test runner's timeout): give back what is left
            signal.setitimer(signal.ITIMER_REAL,
                             max(pending - (time.monotonic() - began), 0.001), interval)
    return _result(value, shown)


def _again(done: list):
    """A trace function raising CheckTimeout at each line the check runs until ``done``."""
    def again(frame, event, arg):
        if done:
            return None
        if event == "line":
            raise CheckTimeout()
        return again
    return again


def _stop_at_the_next_line(frame, done: list) -> None:
    """Past its budget, the check stops again at the next line it runs: code that swallows
    the first stop (a bare ``except:`` in a retry loop) meets this one in its handler,
    outside its ``try``. Only the check's own frames, up to :func:`_with_alarm`'s."""
    again = _again(done)
    while frame is not None and frame.f_code is not _with_alarm.__code__:
        frame.f_trace = again
        frame = frame.f_back
    sys.settrace(again)


def _in_thread(run, budget: float) -> Outcome:
    box: dict[str, Any] = {}
    done: list = []

    def calls(frame, event, arg):  # traces calls only (a check runs up to 2x slower)...
        return _again(done) if box.get("stopping") else None  # ...until told to stop

    def work() -> None:
        sys.settrace(calls)  # so that a stop can reach frames already running (below)
        try:
            try:
                box["value"], box["shown"] = run()
            except BaseException as exc:  # noqa: BLE001 - every failure of a check is an outcome
                box["error"] = exc
            finally:
                done.append(True)
                sys.settrace(None)
        except CheckTimeout:  # told to stop just as it ended: no traceback in a cell
            box.setdefault("error", CheckTimeout())

    worker = threading.Thread(target=work, name="nbmemory-check", daemon=True)
    began = time.monotonic()
    worker.start()
    worker.join(budget)
    if worker.is_alive() and not done:  # stopped as SIGALRM would: at its next line of Python
        box["stopping"] = True  # and at each after: a bare except: swallows the first stop
        frame = sys._current_frames().get(worker.ident)
        while frame is not None and frame.f_code is not work.__code__:
            frame.f_trace = _again(done)
            frame = frame.f_back
        ident, stop = ctypes.c_ulong(worker.ident), ctypes.pythonapi.PyThreadState_SetAsyncExc
        if stop(ident, ctypes.py_object(CheckTimeout)) > 1:  # never: undo, as the API asks
            stop(ident, None)
        worker.join(STOP_WAIT)
    if worker.is_alive():
        return Outcome("error", error=f"{_PAST_BUDGET} of {budget:g} s (left running in the "
                                      "background: a call into C, such as sum() or a pandas "
                                      "method, is only stopped once it returns)")
    if "error" in box:
        return _error(box["error"], budget, time.monotonic() - began)
    return _result(box.get("value"), box.get("shown"))


def check_anchor(expression: str, namespace: Mapping[str, Any], outcome: Outcome,
                 scope: str = "") -> Anchor:
    """The anchor a passing check is stored as."""
    names = names_read(expression, namespace)
    fingerprints = {}
    for name in names:
        try:
            fingerprints[name] = variable_fingerprint(namespace[name])
        except Exception:  # noqa: BLE001 - a value that cannot be fingerprinted is skipped
            continue
    return Anchor("check", expression.strip(), {"names": names, "value": outcome.value,
                                                "scope": scope, "variables": fingerprints},
                  "check")
