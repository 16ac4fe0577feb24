"""Git repositories known by identity, so that a team's notes about a file in a repository
are checked against each member's own checkout, wherever it is.

A repository's identity is its ``origin`` remote without scheme, credentials and ``.git``
(``github.com/team/orders``), else its root commit (``commit:1a2b...``). A team store's
anchor to ``~/src/orders/data/orders.csv`` keeps ``data/orders.csv`` and that identity; a
colleague's owner finds their own checkout of it (checkouts this machine has anchored in or
worked from, remembered in the store's cache directory, else a shallow look under the home
directory) or says the repository is not here.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import time
from pathlib import Path

from .config import find_git_root
from .provenance import GIT_TEXT, NO_CONSOLE

SEARCH_DEPTH = 3  # directories below home searched for a checkout
SEARCH_LIMIT = 5_000  # directories looked at, at most
SEARCH_AGAIN_S = 60  # a checkout not found is looked for again after this long
_SKIP = {"node_modules", "site-packages", "__pycache__", "venv", ".venv"}


def normalise_remote(url: str) -> str:
    """``git@github.com:team/x.git``, ``https://user:token@github.com/team/x`` ->
    ``github.com/team/x`` (never a credential)."""
    url = url.strip()
    url = re.sub(r"^[a-z][a-z0-9+.-]*://", "", url, flags=re.I)  # scheme
    url = re.sub(r"^[^@/]*@", "", url)  # user[:password]@
    url = re.sub(r"^([^/:]+):(?!\d+/)", r"\1/", url)  # scp-like host:path
    url = re.sub(r"^([^/:]+):\d+/", r"\1/", url)  # a port
    return re.sub(r"(\.git)?/*$", "", url).lower()


def _git(root: Path, *args: str) -> str:
    try:
        done = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True,
                              timeout=10, check=False, **GIT_TEXT, **NO_CONSOLE)
    except (OSError, subprocess.SubprocessError):
        return ""
    return done.stdout.strip() if done.returncode == 0 else ""


def identity(root: Path) -> str | None:
    """The identity of the repository whose top directory is ``root``, or None (no git, or
    no remote and no commit yet)."""
    remote = _git(root, "config", "--get", "remote.origin.url")
    if remote:
        return normalise_remote(remote)
    first = sorted(_git(root, "rev-list", "--max-parents=0", "HEAD").split())
    return f"commit:{first[0]}" if first else None


class Repositories:
    """Checkouts on this machine by identity, kept in ``registry`` (a JSON file)."""

    def __init__(self, registry: Path, search: Path | None = None):
        self.registry = Path(registry)
        self.search = Path(search) if search else Path.home()
        self._roots: dict[str, str] = self._load()
        self._identities: dict[str, str | None] = {}  # root -> identity, this process
        self._searched_at: float | None = None  # when the home directory was last searched

    def _load(self) -> dict[str, str]:
        try:
            data = json.loads(self.registry.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        return {str(k): str(v) for k, v in data.items()} if isinstance(data, dict) else {}

    def _save(self) -> None:
        tmp = self.registry.with_name(self.registry.name + ".tmp")
        try:
            tmp.write_text(json.dumps(self._roots, indent=1, sort_keys=True), encoding="utf-8")
            os.replace(tmp, self.registry)
        except OSError:
            pass  # a cache: the next search finds the checkout again

    def _identity(self, root: Path) -> str | None:
        key = str(root)
        if key not in self._identities:
            self._identities[key] = identity(root)
        return self._identities[key]

    def of(self, path: Path) -> tuple[Path, str] | None:
        """(top directory, identity) of the repository ``path`` is in, remembered; or None."""
        root = find_git_root(Path(path).resolve() if Path(path).is_dir()
                             else Path(path).resolve().parent)
        if root is None:
            return None
        found = self._identity(root)
        if found is None:
            return None
        if self._roots.get(found) != str(root):
            self._roots[found] = str(root)
            self._save()
        return root, found

    def locate(self, wanted: str) -> Path | None:
        """This machine's checkout of the repository ``wanted``, or None."""
        known = self._roots.get(wanted)
        if known and Path(known).is_dir() and self._identity(Path(known)) == wanted:
            return Path(known)
        # Again once a while has passed: a repository cloned since this owner searched.
        if self._searched_at is None or time.monotonic() - self._searched_at > SEARCH_AGAIN_S:
            self._searched_at = time.monotonic()
            self._search()
            known = self._roots.get(wanted)
            if known:
                return Path(known)
        return None

    def _search(self) -> None:
        """Remember every checkout up to SEARCH_DEPTH below the search directory."""
        seen, level = 0, [self.search]
        for _ in range(SEARCH_DEPTH + 1):
            below = []
            for directory in level:
                if (directory / ".git").exists():
                    self.of(directory)
                    if directory != self.search:
                        continue
                try:
                    entries = list(os.scandir(directory))
                except OSError:
                    continue
                for entry in entries:
                    seen += 1
                    if seen > SEARCH_LIMIT:
                        return
                    if (entry.is_dir(follow_symlinks=False) and not entry.name.startswith(".")
                            and entry.name not in _SKIP):
                        below.append(Path(entry.path))
            level = below
