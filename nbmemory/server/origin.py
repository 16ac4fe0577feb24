"""Where a note written in the panel comes from: the ``provenance`` the panel sends,
checked, and the provenance recorded (git state, the user, the notebook's cell)."""

from __future__ import annotations

import os
from pathlib import Path, PureWindowsPath
from typing import Any

from ..errors import InvalidInput
from ..models import Provenance

# What the panel may say about where a note written in it comes from.
PROVENANCE_FIELDS = ("notebook", "cell_id", "execution_count", "cell_source")
MAX_LENGTH = {"notebook": 4096, "cell_id": 200}  # a path's limit; nbformat's ids are 64 at most


def provenance_fields(value: Any, root: str | None) -> dict[str, Any]:
    """Check the ``provenance`` the panel sends: a notebook under the server root (as
    JupyterLab names it), the cell's id, execution count and source."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise InvalidInput("Field 'provenance' must be an object such as "
                           '{"notebook": "analysis.ipynb", "cell_id": "..."}.')
    unknown = sorted(set(value) - set(PROVENANCE_FIELDS))
    if unknown:
        raise InvalidInput(f"Unknown provenance field(s) {', '.join(unknown)}; allowed: "
                           f"{', '.join(PROVENANCE_FIELDS)}.")
    for name in ("notebook", "cell_id", "cell_source"):
        text = value.get(name)
        if text is None:
            continue
        if not isinstance(text, str):
            raise InvalidInput(f"Provenance field {name!r} must be a string.")
        if "\x00" in text or not _encodes(text):
            raise InvalidInput(f"Provenance field {name!r} holds a NUL or a character that is "
                               "not valid Unicode (a lone surrogate).")
        if len(text) > MAX_LENGTH.get(name, len(text)):
            raise InvalidInput(f"Provenance field {name!r} has {len(text):,} characters; "
                               f"at most {MAX_LENGTH[name]:,}.")
    count = value.get("execution_count")
    if count is not None and (not isinstance(count, int) or isinstance(count, bool)
                              or not 0 <= count < 2**31):
        raise InvalidInput("Provenance field 'execution_count' must be a whole number "
                           "from 0 (a cell's [N]).")
    fields = {k: v for k, v in value.items() if v not in (None, "")}
    if "notebook" in fields:
        if not fields["notebook"].lower().endswith(".ipynb"):  # its cell would be looked for
            raise InvalidInput(f"Provenance field 'notebook' must name a notebook (*.ipynb), "
                               f"not {fields['notebook']!r}.")
        fields["notebook"] = server_path(fields["notebook"], root)
    elif "cell_id" in fields or "cell_source" in fields:
        raise InvalidInput("Provenance names a cell but not its notebook; add 'notebook'.")
    return fields


def _encodes(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _windows_absolute(path: str) -> bool:
    """A drive (``C:x``, ``D:\\x``) or a root (``\\x``, ``/x``) as Windows reads it: on
    Windows ``base / "/etc/x"`` is ``D:\\etc\\x``, out of the root."""
    windows = PureWindowsPath(path)
    return bool(windows.drive or windows.root)


def server_path(lab: str, root: str | None) -> str:
    """The absolute path of ``lab`` (a path JupyterLab shows), refused outside the root.

    Containment is checked on the path as given, normalised, as JupyterLab checks it: a
    folder under the root that is a link to elsewhere (``data -> ../shared``) is under the
    root, as JupyterLab lists and opens it; a ``..`` that climbs out, or an absolute path,
    is not."""
    base = Path(root or os.getcwd()).expanduser().resolve()
    relative = Path(os.path.normpath(lab))
    if (Path(lab).is_absolute() or relative.is_absolute() or relative.parts[:1] == ("..",)
            or _windows_absolute(lab)):
        raise InvalidInput(f"The notebook {lab!r} is not under the Jupyter server's root "
                           "directory; give its path as JupyterLab shows it.")
    return str(base / relative)


def panel_provenance(where: dict[str, Any], author: str | None, root: str | None) -> Provenance:
    """Provenance of a note written in the panel: git state of the notebook's folder
    (or the server root), the user, and the notebook cell when the panel names one.

    Without the dirty flag: ``git status`` runs a clean filter a folder's ``.git/config``
    and ``.gitattributes`` name, and a request must not run a folder's programs on the
    server (a user allowed to write notes may not be allowed to run code)."""
    from ..provenance import MAX_SOURCE, capture, source_hash

    notebook = where.get("notebook")
    root = root or os.getcwd()
    cwd = Path(notebook).parent if notebook else Path(root).expanduser()
    try:
        usable = cwd.is_dir()
    except OSError:  # a path longer than the system takes
        usable = False
    fields = capture(None, cwd=cwd if usable else root, source="panel", dirty=False).to_dict()
    fields.update({k: v for k, v in where.items() if k != "cell_source"})
    source = where.get("cell_source")
    if source and source.strip():
        fields["cell_hash"] = source_hash(source)
        fields["cell_source"] = source[:MAX_SOURCE]
    if author:
        fields["author"] = author
    return Provenance.from_dict(fields)
