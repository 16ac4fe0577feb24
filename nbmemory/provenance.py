"""Where a note came from: notebook, cell, kernel, git state, author and time.

Captured in the kernel by the magics on every ``%remember``. Every piece is best effort:
a missing piece is left out, and capturing never fails a remember. Only the standard
library is imported here (the kernel must stay light); git is read from ``.git`` files,
with one short ``git status`` subprocess for the dirty flag. Where the files do not say
(the reftable ref format of git >= 2.45, whose HEAD file is the stub
``ref: refs/heads/.invalid``), ``git symbolic-ref`` and ``git rev-parse`` are asked.

How the notebook and the cell are found, in order:

- notebook: ``JPY_SESSION_NAME`` (jupyter_server sets it in every kernel it starts for a
  session: an absolute path, or an API path relative to the server root), ipykernel's
  ``__session__``, VS Code's ``__vsc_ipynb_file__``; failing those (nbclient, nbconvert,
  papermill set nothing), the one notebook in the working directory that has a code cell
  whose source is exactly the cell being run (of several, the one the program that started
  the kernel names, or the original of copies: :func:`find_cell`).
- cell: the ``cellId`` JupyterLab and Notebook 7 put in the execute request's metadata;
  failing that, the id of that matching cell in the notebook file.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import socket
import subprocess
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Mapping

from .config import current_user
from .models import Provenance

# What git writes is UTF-8 on every system (not the locale's code page, as on Windows).
GIT_TEXT = {"encoding": "utf-8", "errors": "replace"}
# A kernel has no console on Windows: without this each git call flashes a window.
NO_CONSOLE = {"creationflags": subprocess.CREATE_NO_WINDOW} if os.name == "nt" else {}

MAX_SOURCE = 4096  # characters of the cell source kept with a note
MAX_NOTEBOOK_BYTES = 50 * 2**20  # notebooks larger than this are not parsed
MAX_SEARCHED_NOTEBOOKS = 50
GIT_TIMEOUT = 1.0


def source_hash(source: str) -> str:
    """Hash of a cell's source, insensitive to line endings and surrounding blank space."""
    text = source.replace("\r\n", "\n").strip()
    return hashlib.sha256(text.encode()).hexdigest()[:32]


# -- notebooks ---------------------------------------------------------------------------

def notebook_cells(path: str | os.PathLike) -> dict[str, tuple[str, str]] | None:
    """``{cell_id: (cell_type, source)}`` of a notebook file's cells, or None if unreadable."""
    try:
        path = Path(path)
        if path.stat().st_size > MAX_NOTEBOOK_BYTES:
            return None
        data = json.loads(path.read_text(encoding="utf-8"))
        cells = {}
        for cell in data.get("cells") or ():
            if not cell.get("id"):
                continue
            source = cell.get("source", "")
            cells[str(cell["id"])] = (str(cell.get("cell_type", "code")),
                                      "".join(source) if isinstance(source, list) else str(source))
        return cells
    except (OSError, ValueError, AttributeError, TypeError):
        return None


def _resolve_notebook(value: str, cwd: Path) -> str | None:
    value = value.strip()
    if not value:
        return None
    path = Path(value).expanduser()
    if path.is_absolute():
        return str(path) if path.suffix == ".ipynb" or path.is_file() else None
    # An API path relative to the server root: the kernel runs in the notebook's directory.
    for candidate in (cwd / path.name, cwd / path):
        if candidate.is_file():
            return str(candidate.resolve())
    return None


def notebook_from_session(user_ns: Mapping[str, Any], environ: Mapping[str, str],
                          cwd: Path) -> str | None:
    for value in (environ.get("JPY_SESSION_NAME"), user_ns.get("__session__"),
                  user_ns.get("__vsc_ipynb_file__")):
        if isinstance(value, str):
            path = _resolve_notebook(value, cwd)
            if path:
                return path
    return None


def find_cell(source: str, directory: Path, notebook: str | None = None) -> tuple[str, str] | None:
    """(notebook, cell id) of the one code cell whose source is ``source``.

    Looks in ``notebook`` if given, else in the notebooks of ``directory``. None when no
    cell or more than one matches (a guess would be worse than nothing), except:

    - the notebook the program that started this kernel runs (``jupyter nbconvert --execute
      orders.ipynb``, ``papermill orders.ipynb out.ipynb``: :func:`runner_notebooks`),
      when it runs one and that one has the cell once: a report copied beside it, or
      another notebook with the same line, made Run All write every note again;
    - copies of one notebook (the same cell, same id, in each): the one whose name starts
      the others' (``orders.ipynb`` beside ``orders.nbconvert.ipynb``), else the oldest
      file (the copies were written after it).
    """
    wanted = source_hash(source)
    named = runner_notebooks()
    if notebook:
        paths = [Path(notebook)]
    else:
        try:
            paths = sorted(directory.glob("*.ipynb"))[:MAX_SEARCHED_NOTEBOOKS]
        except OSError:
            return None
        # papermill's kernel runs in papermill's folder, not the notebook's
        searched = {path.resolve() for path in paths}
        paths += [Path(path) for path in named if Path(path) not in searched]
    found = []
    for path in paths:
        for cell_id, (kind, cell_source) in (notebook_cells(path) or {}).items():
            if kind == "code" and source_hash(cell_source) == wanted:
                found.append((str(path.resolve()), cell_id))
    if len(named) == 1 and (here := [match for match in found if match[0] == named[0]]):
        return here[0] if len(here) == 1 else None
    if len(found) < 2:
        return found[0] if found else None
    if len({cell_id for _, cell_id in found}) == 1:
        stems = sorted(found, key=lambda match: len(Path(match[0]).stem))
        original = Path(stems[0][0]).stem
        if all(Path(path).stem.startswith(original) for path, _ in stems[1:]):
            return stems[0]
        return min(found, key=lambda match: _modified(match[0]))
    return None


def _modified(path: str) -> float:
    try:
        return os.stat(path).st_mtime
    except OSError:
        return float("inf")


_RUNNER: list[tuple[str, ...]] = []
# Programs that run the notebooks they name; a server names one to open, not each kernel's.
RUNNERS = {"jupyter-nbconvert", "nbconvert", "jupyter-execute", "papermill"}
_OUTPUT_OPTIONS = {"--output", "-o", "--output-dir"}


def runner_notebooks() -> tuple[str, ...]:
    """The notebooks (resolved paths) the program that started this kernel runs, as its
    command line names them (papermill: its input, not where it writes); none when another
    program started it or its command line cannot be read."""
    if not _RUNNER:
        named: tuple[str, ...] = ()
        try:  # psutil comes with ipykernel; imported late to keep a kernel's start light
            import psutil

            parent = psutil.Process().parent()
            if parent is not None:
                named = notebooks_run_by(parent.cmdline(), Path(parent.cwd()))
        except Exception:  # noqa: BLE001 - gone, not allowed to read it, no psutil
            pass
        _RUNNER.append(named)
    return _RUNNER[0]


def notebooks_run_by(args: list[str], cwd: Path) -> tuple[str, ...]:
    """The notebooks a command line (``args``, run in ``cwd``) runs: see runner_notebooks."""
    program = next((Path(arg).stem for arg in args[:3] if Path(arg).stem in RUNNERS), None)
    if program is None:
        return ()
    named, value = [], False
    for arg in args[1:]:
        if not value and arg.endswith(".ipynb") and not arg.startswith("-"):
            named.append(str((cwd / arg).resolve()))
        value = arg in _OUTPUT_OPTIONS
    return tuple(named[:1] if program == "papermill" else named)


# -- the running cell --------------------------------------------------------------------

def _parent(shell) -> dict:
    kernel = getattr(shell, "kernel", None)
    if kernel is None:
        return {}
    try:
        try:
            parent = kernel.get_parent("shell")
        except TypeError:
            parent = kernel.get_parent()
    except Exception:
        parent = getattr(shell, "parent_header", None)
    return parent if isinstance(parent, dict) else {}


def notebook_path(shell, *, environ: Mapping[str, str] | None = None,
                  cwd: Path | None = None, code: str | None = None) -> str | None:
    """The notebook this kernel runs, if it can be told (see the module docstring)."""
    if getattr(shell, "kernel", None) is None:
        return None
    environ = os.environ if environ is None else environ
    cwd = Path(cwd or os.getcwd())
    path = notebook_from_session(getattr(shell, "user_ns", {}) or {}, environ, cwd)
    if path is None and code and code.strip():
        found = find_cell(code, cwd)
        path = found[0] if found else None
    return path


def current_cell(shell) -> tuple[str | None, str | None]:
    """(cell id, raw source) of the cell being run, as far as the front end tells."""
    parent = _parent(shell)
    if parent:
        metadata = parent.get("metadata") or {}
        content = parent.get("content") or {}
        cell_id = metadata.get("cellId") or metadata.get("cell_id")
        code = content.get("code")
        return (str(cell_id) if cell_id else None), (code if isinstance(code, str) else None)
    history = _history(shell)  # terminal IPython: the raw input is stored before it runs
    return None, (history[-1] if len(history) > 1 else None)


def _history(shell) -> list:
    try:
        return list(shell.history_manager.input_hist_raw)
    except Exception:
        return []


def execution_count(shell, code: str | None) -> int | None:
    """The running cell's number: its place in the input history, once it is stored there.

    (``shell.execution_count`` is already the next number while a cell runs in IPython 9
    but not in 8, so the history is the reliable witness.)
    """
    history = _history(shell)
    if len(history) > 1 and (code is None or history[-1].rstrip() == code.rstrip()):
        return len(history) - 1
    return None


def kernel_session(shell) -> str | None:
    """The kernel id from its connection file (``kernel-<id>.json``), or the session id."""
    kernel = getattr(shell, "kernel", None)
    if kernel is None:
        return None
    try:
        from ipykernel.connect import get_connection_file

        name = Path(get_connection_file()).stem
        if name.startswith("kernel-"):
            return name[len("kernel-"):]
    except Exception:
        pass
    session = getattr(getattr(kernel, "session", None), "session", None)
    return str(session) if session else None


# -- git ---------------------------------------------------------------------------------

def _git_dirs(start: Path) -> tuple[Path, Path, Path] | None:
    """(work tree root, git dir, common dir) for ``start``, following worktree ``.git`` files."""
    for directory in (start, *start.parents):
        dot_git = directory / ".git"
        if dot_git.is_dir():
            return directory, dot_git, dot_git
        if dot_git.is_file():
            try:
                text = dot_git.read_text(**GIT_TEXT).strip()
            except OSError:
                return None
            if not text.startswith("gitdir:"):
                return None
            git_dir = Path(text[len("gitdir:"):].strip())
            if not git_dir.is_absolute():
                git_dir = (directory / git_dir).resolve()
            common = git_dir
            try:
                common = (git_dir / (git_dir / "commondir").read_text(**GIT_TEXT).strip()).resolve()
            except OSError:
                pass
            return directory, git_dir, common
    return None


def _read_ref(git_dir: Path, common: Path, ref: str) -> str | None:
    for base in (git_dir, common):
        try:
            return (base / ref).read_text(**GIT_TEXT).strip() or None
        except OSError:
            continue
    try:
        for line in (common / "packed-refs").read_text(**GIT_TEXT).splitlines():
            if line.endswith(" " + ref) and not line.startswith(("#", "^")):
                return line.split(" ", 1)[0]
    except OSError:
        pass
    return None


COMMIT = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")  # SHA-1 or SHA-256


def _plain_head(head: str, common: Path) -> bool:
    """True when the HEAD file itself says the branch or commit (the "files" ref format)."""
    if (common / "reftable").is_dir():
        return False
    if head.startswith("ref:"):
        ref = head[4:].strip()
        return ref.startswith("refs/") and not any(
            part.startswith(".") or not part for part in ref.split("/"))
    return COMMIT.fullmatch(head) is not None


def _git(root: Path, timeout: float, *args: str) -> str | None:
    """``git -C root ARGS``'s output, or None if git fails, is missing or is slow.

    A repository's own config may name a program for ``git status`` to run: its file
    monitor is turned off. (Its clean filters cannot be; the server asks for no dirty flag.)
    """
    try:
        result = subprocess.run(["git", "-c", "core.fsmonitor=false", "-C", str(root), *args],
                                capture_output=True, text=True, **GIT_TEXT, **NO_CONSOLE,
                                timeout=timeout,
                                env={**os.environ, "GIT_OPTIONAL_LOCKS": "0"})
    except (OSError, subprocess.SubprocessError):
        return None
    return result.stdout.strip() if result.returncode == 0 else None


def _head_from_git(root: Path, timeout: float) -> dict[str, Any]:
    """Branch and commit as git itself reads them (any ref format)."""
    info: dict[str, Any] = {}
    ref = _git(root, timeout, "symbolic-ref", "-q", "HEAD")  # fails when detached
    if ref and ref.startswith("refs/heads/"):
        info["git_branch"] = ref.removeprefix("refs/heads/")
    commit = _git(root, timeout, "rev-parse", "-q", "--verify", "HEAD^{commit}")
    if commit and COMMIT.fullmatch(commit):  # absent on an unborn branch
        info["git_commit"] = commit
    return info


def git_info(start: str | os.PathLike, *, dirty: bool = True,
             timeout: float = GIT_TIMEOUT) -> dict[str, Any]:
    """``workspace``, ``git_commit``, ``git_branch`` and ``git_dirty`` for ``start``.

    Commit and branch are read from the ``.git`` files, or from git when HEAD there is
    not a plain ref or commit (reftable repositories); ``git_dirty`` (tracked or untracked
    changes, submodules ignored) takes one ``git status`` with a short timeout and is left
    out if git is missing or slow. ``GIT_OPTIONAL_LOCKS=0`` keeps it from touching the index.
    """
    dirs = _git_dirs(Path(start).resolve())
    if dirs is None:
        return {}
    root, git_dir, common = dirs
    info: dict[str, Any] = {"workspace": str(root)}
    try:
        head = (git_dir / "HEAD").read_text(**GIT_TEXT).strip()
    except OSError:
        return info
    if not _plain_head(head, common):
        info.update(_head_from_git(root, timeout))
    elif head.startswith("ref:"):
        ref = head[4:].strip()
        info["git_branch"] = ref.removeprefix("refs/heads/")
        commit = _read_ref(git_dir, common, ref)
        if commit:
            info["git_commit"] = commit
    else:
        info["git_commit"] = head
    if dirty:
        status = _git(root, timeout, "status", "--porcelain", "--untracked-files=normal",
                      "--ignore-submodules")  # 4 ms instead of 16-23 ms in a 2k-file repository
        if status is not None:
            info["git_dirty"] = bool(status)
    return info


# -- all together ------------------------------------------------------------------------

def author(environ: Mapping[str, str] | None = None) -> str:
    return current_user(environ)


def capture(shell=None, *, environ: Mapping[str, str] | None = None,
            cwd: str | os.PathLike | None = None, source: str | None = None,
            dirty: bool = True) -> Provenance:
    """The provenance of a note written now from ``shell`` (an IPython shell, or None);
    ``dirty=False`` leaves out the worktree's dirty flag (no ``git status``)."""
    environ = os.environ if environ is None else environ
    cwd = Path(cwd or os.getcwd())
    fields: dict[str, Any] = {
        "cwd": str(cwd),
        "author": author(environ),
        "captured_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
    }
    try:
        fields.update(git_info(cwd, dirty=dirty))
    except Exception:
        pass
    if shell is None:
        fields["source"] = source or "api"
        return Provenance(**fields)
    in_kernel = getattr(shell, "kernel", None) is not None
    try:
        cell_id, code = current_cell(shell)
        fields["execution_count"] = execution_count(shell, code)
        user_ns = getattr(shell, "user_ns", {}) or {}
        notebook = notebook_from_session(user_ns, environ, cwd) if in_kernel else None
        if code is not None and code.strip():
            fields["cell_hash"] = source_hash(code)
            fields["cell_source"] = code[:MAX_SOURCE]
            if in_kernel and (notebook is None or cell_id is None):
                found = find_cell(code, cwd, notebook)
                if found:
                    notebook = notebook or found[0]
                    cell_id = cell_id or found[1]
        if notebook:
            fields["notebook"] = notebook
        if cell_id:
            fields["cell_id"] = cell_id
        fields["kernel_session"] = kernel_session(shell)
    except Exception:
        pass
    fields["source"] = source or ("notebook" if fields.get("notebook") else
                                  "kernel" if in_kernel else "ipython")
    return Provenance(**{k: v for k, v in fields.items() if v is not None})


def same_run(one: Provenance, other: Provenance) -> bool:
    """Whether two notes were written by one run of a cell (two %remember lines in it). The
    cell's source too: a restarted kernel keeps its id and counts from 1 again."""
    return (one.kernel_session is not None and one.execution_count is not None
            and (one.kernel_session, one.execution_count, one.cell_hash)
            == (other.kernel_session, other.execution_count, other.cell_hash))


def cell_request_ids(provenance: Provenance, line: str, cell: str | None,
                     text: str) -> tuple[str, ...]:
    """A ``%remember``'s request id, made from the cell that runs it and the note it writes:
    running that cell again (Run All, a restarted kernel, the notebook renamed or copied)
    finds the note it wrote instead of a copy, as a resent write does; another text (a
    procedure whose cells read differently now) writes a new note. Then the id cells carried
    before (their notebook's path, not the text), so that a note written then is found too.
    None outside a notebook's cell (a terminal's line is typed anew)."""
    if not (provenance.notebook and provenance.cell_id):
        return ()
    # The host too: two members of a team store may both be "jovyan" at the same path.
    who = (provenance.author or "", socket.gethostname())
    return tuple("cell-" + hashlib.sha256("\0".join(key).encode(
        "utf-8", "surrogatepass")).hexdigest()[:32] for key in (
        (*who, provenance.cell_id, line, cell or "", "text", text),
        (*who, provenance.notebook, provenance.cell_id, line, cell or "")))
