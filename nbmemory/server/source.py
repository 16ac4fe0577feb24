"""Where the notebook a note came from is now: still there, or renamed (found by its cell).

Reading notebooks happens on a thread of its own, never on the store's worker.
"""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path
from typing import Iterator

from .handlers import NbMemoryHandler, api, note_id

# Looking for a renamed notebook: at most this many notebooks, none larger than this, in at
# most this many folders.
MAX_SCANNED_NOTEBOOKS = 2000
MAX_SCANNED_FOLDERS = 20_000
MAX_SCANNED_BYTES = 20 * 2**20
SKIPPED_DIRS = {"node_modules", "__pycache__", "site-packages", ".ipynb_checkpoints"}


class SourceHandler(NbMemoryHandler):
    @api
    async def get(self, ident: str):
        """Where the notebook a note came from is now: ``exists``, and when it is gone,
        ``moved_to``: notebooks under the root that hold the note's cell (a rename)."""
        note = await self.call(lambda m: self.note(m.get(note_id(ident))), "get")
        path = note.get("lab_path")
        root = self.root
        cell_id = note.get("provenance", {}).get("cell_id")
        if not path or not root:
            self.reply({"lab_path": path, "exists": False, "moved_to": []})
            return
        try:
            exists = (Path(root).expanduser() / path).is_file()
        except OSError:  # a name longer than the system takes, say: no such notebook
            exists = False
        moved: list[str] = []
        if not exists and cell_id:
            moved = await asyncio.get_running_loop().run_in_executor(
                None, find_cell_notebooks, Path(root).expanduser(), cell_id)
        self.reply({"lab_path": path, "exists": exists, "moved_to": moved})


def find_cell_notebooks(root: Path, cell_id: str) -> list[str]:
    """Notebooks under ``root`` (as JupyterLab names them) with a cell of id ``cell_id``,
    newest first. Hidden folders, checkpoints and environments are skipped; at most
    :data:`MAX_SCANNED_NOTEBOOKS` are read, in at most :data:`MAX_SCANNED_FOLDERS` folders."""
    found: list[tuple[float, str]] = []
    needle = f'"{cell_id}"'
    for path in _notebooks(root):
        try:
            if path.stat().st_size > MAX_SCANNED_BYTES:
                continue
            text = path.read_text(encoding="utf-8")
            if needle not in text:
                continue
            cells = json.loads(text).get("cells") or []
        except (OSError, ValueError, AttributeError):
            continue
        if any(isinstance(c, dict) and c.get("id") == cell_id for c in cells):
            found.append((path.stat().st_mtime, path.relative_to(root).as_posix()))
    return [p for _, p in sorted(found, reverse=True)]


def _notebooks(root: Path) -> Iterator[Path]:
    """The notebooks under ``root`` the search may read, within its limits: a server rooted
    at a home directory must not walk every folder under it on each request."""
    scanned = 0
    for folders, (folder, dirs, files) in enumerate(os.walk(root), start=1):
        dirs[:] = [d for d in dirs if not d.startswith(".") and d not in SKIPPED_DIRS]
        for name in files:
            if name.endswith(".ipynb"):
                scanned += 1
                if scanned > MAX_SCANNED_NOTEBOOKS:
                    return
                yield Path(folder) / name
        if folders >= MAX_SCANNED_FOLDERS:
            return
