"""Domain objects in plain words, shared by every front end and the Markdown export:
ages, counts, stale markers, where a note came from, what it is about.

No HTML here (display.py escapes these for notebooks) and no front-end syntax.
"""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

from .models import Anchor, Event, Note, utcnow


def local(when: datetime) -> datetime:
    """``when`` (UTC; a naive time is UTC too) in this machine's time zone: times are shown as
    people read them, and a bare day they type is a local day (memory.py)."""
    return (when if when.tzinfo else when.replace(tzinfo=timezone.utc)).astimezone()


def age(when: datetime | None, now: datetime | None = None) -> str:
    if when is None:
        return ""
    seconds = max(0.0, ((now or utcnow()) - when).total_seconds())
    for limit, unit, size in ((60, "s", 1), (3600, "min", 60), (86400, "h", 3600),
                              (86400 * 14, "d", 86400), (86400 * 60, "wk", 86400 * 7),
                              (86400 * 730, "mo", 86400 * 30)):
        if seconds < limit:
            return f"{int(seconds // size)} {unit}"
    return f"{int(seconds // (86400 * 365))} y"


# Terminal control characters (C0 but tab and newline, DEL, C1) shown as \\xNN: a note's
# text (imported, or written by an agent) must not move the cursor, retitle the terminal
# or hide what precedes it. Nor reorder it: bidirectional overrides, embeddings and
# isolates (U+202A-202E, U+2066-2069) are shown as \\uNNNN (the "Trojan Source" trick).
_CONTROL = {c: f"\\x{c:02x}" for c in [*range(0x09), *range(0x0b, 0x20), *range(0x7f, 0xa0)]}
_CONTROL.update({c: f"\\u{c:04x}" for c in [*range(0x202a, 0x202f), *range(0x2066, 0x206a)]})


# JSON escapes C0 itself; DEL and C1 (which a terminal may obey) it leaves as they are.
JSON_CONTROL = {c: f"\\u{c:04x}" for c in range(0x7f, 0xa0)}


def statuses_text(statuses: str) -> str:
    """``active,revoked`` -> ``active or revoked`` (for "3 active or revoked notes")."""
    return " or ".join(s.strip() for s in statuses.split(",") if s.strip())


def printable(text: str) -> str:
    """``text`` safe to write to a terminal (Windows line ends read as line ends)."""
    return text.replace("\r\n", "\n").translate(_CONTROL)


def counted(n: int, noun: str) -> str:
    """``1 note``, ``2 notes``."""
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def exported_text(counts: dict[str, int], path: str) -> str:
    return (f"Exported {counted(counts.get('notes', 0), 'note')}, "
            f"{counted(counts.get('events', 0), 'journal event')} and "
            f"{counted(counts.get('snapshots', 0), 'snapshot')} to {path}.")


def pointer_hint(note_id: int, example: str) -> str:
    """For a note that is only a location; ``example`` supersedes it in a front end's words."""
    return (f"#{note_id} is only a location. Pointers go stale as code moves: store the "
            f"finding itself (what happens there and why it matters), e.g. {example}")


def imported_text(summary: dict[str, int], path: str) -> str:
    """``Imported x.jsonl: 2 added, 1 replaced; 1 snapshot; 2 texts embedded.``"""
    if "restored" in summary:
        head = f"Restored {counted(summary['restored'], 'note')} from {path} into the empty store"
    else:
        head = f"Imported {path}: {summary.get('added', 0)} added"
        differ = summary.get("differ", 0)
        for count, words in ((summary.get("skipped", 0) - differ, "skipped (already here)"),
                             (differ, "skipped (here in another version; --on-conflict "
                                      "replace takes the file's)"),
                             (summary.get("replaced"), "replaced"),
                             (summary.get("unchanged"), "unchanged")):
            if count:
                head += f", {count} {words}"
    parts = [head]
    if summary.get("snapshots"):
        parts.append(counted(summary["snapshots"], "snapshot"))
    if summary.get("snapshots_skipped"):
        parts.append(f"{counted(summary['snapshots_skipped'], 'snapshot')} not taken "
                     "(a snapshot of that name is here already)")
    if summary.get("embedded"):
        parts.append(f"{counted(summary['embedded'], 'text')} embedded")
    return "; ".join(parts) + "."


def shared_text(ids, summary: dict[str, int], to: str) -> str:
    """``Shared 2 notes with postgresql://db/team: 1 added, 1 already there.``"""
    parts = [f"{summary.get('added', 0)} added"]
    differ = summary.get("differ", 0)
    same = summary.get("skipped", 0) - differ + summary.get("unchanged", 0)
    if same:
        parts.append(f"{same} already there")
    if differ:
        parts.append(f"{differ} there in another version, left as {'it is' if differ == 1 else 'they are'} "
                     f"(--replace sends this one)")
    if summary.get("replaced"):
        parts.append(f"{summary['replaced']} replaced")
    return f"Shared {counted(len(set(ids)), 'note')} with {to}: {', '.join(parts)}."


def stale_marker(note: Note) -> str:
    """``[STALE: content_changed data/orders.csv]``, plus how a question was resolved."""
    marks = []
    if note.resolution:
        reason = f": {note.resolution_reason}" if note.resolution_reason else ""
        marks.append(f"[{note.resolution.upper()}{reason}]")
    if note.stale:
        marks.append("[STALE: " + "; ".join(str(r) for r in note.stale) + "]")
    return " ".join(marks)


def _short_path(path: str, workspace: str | None) -> str:
    if workspace:
        try:
            return Path(path).relative_to(workspace).as_posix()
        except ValueError:
            pass
    return path


def provenance_line(note: Note) -> str:
    """``analysis/orders.ipynb cell 3f2a9c1e [12] @ main:1a2b3c4d (dirty) by ana, 2026-11-29 18:40``"""
    p = note.provenance
    if p.notebook:
        where = _short_path(p.notebook, p.workspace)
        where += f" cell {p.cell_id[:8]}" if p.cell_id else ""
        if p.execution_count is not None:
            where += f" [{p.execution_count}]"
    else:
        where = f"not from a notebook ({p.source})" if p.source else "not from a notebook"
        if p.source in ("ipython", "kernel") and p.execution_count is not None:
            where += f" [{p.execution_count}]"
    if p.git_commit:
        where += f" @ {p.git_branch or 'detached'}:{p.git_commit[:8]}{' (dirty)' if p.git_dirty else ''}"
    who = p.author or note.author
    when = p.captured_at[:16].replace("T", " ") if p.captured_at else ""
    if who:
        where += f" by {who}"
    if when:
        where += f", {when}"
    return where


def _from(note: Note) -> str:
    line = provenance_line(note)
    return f"from {line}" if note.provenance.notebook else line


def anchor_label(anchor: Anchor) -> str:
    fp = anchor.fingerprint
    if anchor.kind == "variable":
        from .values import describe_variable

        return f"{anchor.target} ({describe_variable(fp)})"
    if anchor.kind == "cell":
        return "its cell"
    if anchor.kind == "check":
        held = f" (held, value {fp['value']})" if fp.get("value") else ""
        return f"check {anchor.target}{held}"
    if anchor.kind == "evidence":
        return f"evidence {anchor.target}"
    if anchor.kind == "data" and "columns" in fp:
        rows = (f", {fp['rows']:,} row{'' if fp['rows'] == 1 else 's'}"
                if fp.get("rows") is not None else "")
        return f"{anchor.target} ({counted(len(fp['columns']), 'column')}{rows})"
    if anchor.kind == "glob":
        shown = f"{anchor.target} ({counted(len(fp.get('files') or ()), 'file')}"
        return shown + (f"; {fp['more']:,} more counted, not read)" if fp.get("more") else ")")
    if anchor.kind == "dir":
        return anchor.target.rstrip("/") + "/"
    return anchor.target


def anchors_line(note: Note) -> str:
    """``data/orders.csv (2 columns, 3 rows), df (DataFrame 3×2), its cell``"""
    return ", ".join(anchor_label(a) for a in note.anchors)


def _not_retaken(anchor, target: str, here: str | None) -> str:
    """What a verify could not re-take, why, and what to do (``here``: the notebook it
    ran in, None outside a kernel)."""
    kind = anchor.kind if anchor is not None else ""
    if kind == "cell":
        return (f"its cell: the notebook {target.split('#', 1)[0]} cannot be read (is it "
                "a valid .ipynb?)")
    scope = anchor.fingerprint.get("scope") if kind == "variable" else None
    if scope and scope != here:  # another notebook's variable of that name is not this one
        return (f"{target}: it is the variable of {Path(scope).name}, where the note "
                "was written: verify there, once the cell that defines it has run")
    if kind == "variable":
        return (f"{target}: it cannot be re-taken here (a variable must exist in this "
                "notebook's kernel: run the cell that defines it, then verify again)")
    return f"{target}: it cannot be read here"


def verified_text(note: Note, event: Event, here: str | None = None) -> str:
    data = event.data
    retaken = data.get("retaken", 0)
    if not note.anchors:
        return (f"Verified #{note.id}. It is about no file, data, variable or cell, so it "
                "cannot go stale; the check is recorded in its history.")
    text = f"Verified #{note.id}: re-took {retaken} fingerprint{'s' if retaken != 1 else ''}"
    if data.get("cleared"):
        text += "; cleared " + "; ".join(data["cleared"])
    gone = [r.split(" ", 1)[1] for r in data.get("cleared", ()) if r.startswith("missing ")]
    notebooks = [g.split(" (", 1)[0] for g in gone if "(the notebook it was written in" in g]
    gone = [g for g in gone if "(the notebook it was written in" not in g]
    if notebooks:
        text += (f". The notebook {', '.join(notebooks)} is gone: the note no longer watches "
                 "the cell it came from")
    if gone:  # verified as still true without it: say what that means
        text += (f". {', '.join(gone)} {'is' if len(gone) == 1 else 'are'} gone: the note is "
                 "flagged again only if it comes back changed; if it moved, remember the note "
                 f"again about its new place, superseding #{note.id}")
    if data.get("kept"):
        anchors = {a.target: a for a in note.anchors}
        text += ". Kept the old fingerprint of " + "; ".join(
            _not_retaken(anchors.get(t), t, here) for t in data["kept"])
    still = stale_marker(note)
    if any(r.reason in ("check_failed", "check_error") for r in note.stale):
        still += " (a check's flag clears when the check passes again, not by a verify)"
    return text + "." + (f" Still {still}" if still else "")


def fusion_line(fusion: dict[str, float]) -> str:
    """How a hybrid recall's scores were made, in words (explain mode)."""
    w, bonus, below = fusion["weight"], fusion["priority"], fusion.get("below", 0)
    covers = f"the best keyword match covers {fusion['covered']:.0%} of the query's weighted words"
    priority = f"(+{bonus:g} high priority, -{bonus:g} low)"
    fed = " Lexical includes the words of the best notes, fed back." if w > 0 else ""
    if "short_terms" in fusion:  # not sent by an owner running older code
        asks = (f", one that ends asking too ({fusion['asking_floor']:.0%} if it only asks)"
                if "asking_floor" in fusion else "")
        fed += (f" Dense is a note's cosine; a note of fewer than {fusion['short_terms']:g} "
                f"keyword terms of its own (not the query's) keeps part of it "
                f"({fusion['short_floor']:.0%} at none){asks}.")
    if fusion.get("placed"):  # keyword_places.py
        fed += (f" {fusion['placed']} keyword match(es) covering {fusion['from']:.0%} moved up "
                f"to {fusion['slack']} places below their place by lexical alone.")
    if below and fusion["covered"] >= fusion["from"]:  # ranking._fused: the weight rising
        most = fusion["most"]
        return (f"score = {1 - w:.2f} x dense + {w:.2f} x lexical for the {below} best by it; "
                f"for the others {1 - w:.2f} x (dense + {most / (1 - most):.2f} x lexical), kept "
                f"below those {below} {priority}. Keyword weight {w:.2f}: {covers}, between the "
                f"{fusion['from']:.0%} from which keywords are mixed in and the "
                f"{fusion['full']:.0%} from which fully.{fed}")
    if below:
        return (f"score = dense for the {below} notes closest in meaning; for the others "
                f"dense + {w / (1 - w):.2f} x lexical, kept below those {below} {priority}. "
                f"Keyword weight {w:.2f}: {covers}, under the {fusion['from']:.0%} from which "
                f"keywords are mixed in (fully from {fusion['full']:.0%}).{fed}")
    formula = f"{1 - w:.2f} x dense + {w:.2f} x lexical" if w > 0 else "dense"
    return (f"score = {formula} {priority}. Keyword weight {w:.2f}: {covers} (keywords count "
            f"from {fusion['from']:.0%}, fully from {fusion['full']:.0%}).{fed}")
