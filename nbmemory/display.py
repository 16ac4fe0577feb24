"""Plain-text and HTML forms of notes, hits, snapshots and status.

Every piece of user text goes through ``html.escape`` before it reaches HTML."""

from __future__ import annotations

import html
import textwrap
from dataclasses import replace
from typing import Any, Iterable, Sequence

from .models import CHANGES, Event, Hit, Hits, Note, Snapshot, SnapshotDiff
from .columns import ljust, shorten, width, wrap
from .wording import (_from, _short_path, age, anchors_line, fusion_line, local, printable,
                      stale_marker)

# JupyterLab right-aligns table cells with a more specific rule (.jp-RenderedHTMLCommon
# td): ours must be at least as specific. Only the last column (the note) wraps.
_STYLE = ("<style>.jp-RenderedHTMLCommon .nbm-table td,.jp-RenderedHTMLCommon .nbm-table th,"
          ".nbm-table td,.nbm-table th{text-align:left;vertical-align:top;padding:2px 8px}"
          ".nbm-table td:not(:last-child){white-space:nowrap}"
          ".jp-RenderedHTMLCommon .nbm-table td[dir],.nbm-table td[dir]{text-align:start}"
          ".nbm-stale{color:var(--jp-warn-color0,#b35900);font-weight:600}"
          ".nbm-muted{color:var(--jp-ui-font-color2,#666)}</style>")


class Rich:
    """Something to display with both a text and an HTML form."""

    def __init__(self, text: str, html_text: str):
        self.text = printable(text)  # a terminal shows it; HTML is escaped where built
        self.html = html_text

    def __repr__(self) -> str:
        return self.text

    def _repr_pretty_(self, printer, cycle) -> None:
        printer.text(self.text)

    def _repr_html_(self) -> str:
        return self.html


def _table(headers: Sequence[str], rows: Iterable[Sequence[str]], raw: Sequence[int] = ()) -> str:
    """An HTML table; cells are escaped except the columns listed in ``raw``. User text
    (a note, its tags) takes its direction from itself: Hebrew reads right to left."""
    head = "".join(f"<th>{html.escape(h)}</th>" for h in headers)
    td = ['<td dir="auto">' if h in ("note", "tags", "message") else "<td>" for h in headers]
    body = "".join(
        "<tr>" + "".join(f"{td[i]}{c if i in raw else html.escape(str(c))}</td>"
                         for i, c in enumerate(row)) + "</tr>"
        for row in rows)
    return f'{_STYLE}<table class="nbm-table"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


# A note longer than LONG_NOTE characters is better split (the panel's editor says so too);
# in a table, a note longer than CLAMP shows its start and opens to the rest (a 20k-character
# note made a 4,000 px %recall output).
LONG_NOTE = 2000
CLAMP = 600


def _lines_html(text: str) -> str:
    return html.escape(text).replace("\n", "<br>")


def _cut(text: str) -> int:
    """Where a long note's start ends (at a space near CLAMP), or its length if it is short."""
    if len(text) <= CLAMP + CLAMP // 3:
        return len(text)
    cut = text.rfind(" ", 0, CLAMP)
    return cut if cut > CLAMP // 2 else CLAMP


def _clamped_html(text: str) -> str:
    cut = _cut(text)
    if cut == len(text):
        return _lines_html(text)
    rest = text[cut:]
    return (f'{_lines_html(text[:cut])}<details class="nbm-more"><summary class="nbm-muted">'
            f"… {len(rest):,} more characters</summary>{_lines_html(rest)}</details>")


def text_of(note: Note) -> str:
    """A note's text as shown: a purged note's is gone and says so, in a snapshot's too."""
    return "(text erased)" if note.status == "purged" or not note.text else note.text


def long_note_hint(note: Note) -> str:
    return (f"A long note ({len(note.text):,} characters): recall shows its start; one "
            "finding per note is easier to recall and to keep fresh.")


def _note_cell(note: Note, *, provenance: bool = False) -> str:
    text = _clamped_html(text_of(note))
    marker = stale_marker(note)
    if marker:
        text += f' <span class="nbm-stale">{html.escape(marker)}</span>'
    if provenance:
        text += f'<br><span class="nbm-muted">{html.escape(_from(note))}</span>'
        if note.anchors:
            text += f'<br><span class="nbm-muted">about {html.escape(anchors_line(note))}</span>'
    return text


def _wrap(text: str, size: int = 88, indent: str = "     ") -> str:
    lines = []
    for paragraph in text.splitlines() or [""]:
        lines.extend(wrap(paragraph, size, indent) or [indent])
    return "\n".join(lines)


def _note_header(note: Note, score: float | None = None) -> str:
    bits = [f"#{note.id}"]
    if score is not None:
        bits.append(f"{score:.2f}")
    bits += [note.priority, note.kind, age(note.created_at)]
    if note.tags:
        bits.append(",".join(note.tags))
    if note.status != "active":
        bits.append(note.status.upper())
    header = "  ".join(bits)
    marker = stale_marker(note)
    return f"{header}  {marker}" if marker else header


def _clamped_text(text: str, show: str = "") -> str:
    cut = _cut(text)
    if cut == len(text):
        return _wrap(text)
    more = f"… {len(text) - cut:,} more characters"
    return _wrap(text[:cut].rstrip()) + "\n     " + (f"{more}: {show}" if show else more)


def hits_text(hits: Hits, *, provenance: bool = False, show: str | None = None,
              option: str = "--min-score") -> str:
    """Hits as a terminal shows them; a long note shows its start, and ``show`` (e.g.
    ``"nbmemory show {0}"``) says how to see the rest; ``option`` lowers the threshold."""
    lines = hits.headers
    narrowed = getattr(hits, "filters", "")  # what the front end filtered by, as typed
    if not len(hits):
        lines.append(f"No notes match {hits.query!r}" + (f" with {narrowed}." if narrowed
                                                          else "."))
    else:
        for hit in hits:
            lines.append(_note_header(hit.note, hit.score))
            if hits.explain:
                lines.append("     " + "  ".join(f"{name} {value:.3f}" for name, value in (
                    ("lexical", hit.lexical), ("dense", hit.dense)) if value is not None))
            lines.append(_clamped_text(hit.note.text, show.format(hit.note.id) if show else ""))
            if provenance:
                lines.append("     " + _from(hit.note))
                if hit.note.anchors:
                    lines.append("     about " + anchors_line(hit.note))
    if hits.explain and hits.fusion:
        lines.append(fusion_line(hits.fusion))
    if hits.filtered_out:
        lines.append(f"({hits.filtered_out} more below the score threshold; "
                     f"lower it with {option})")
    for hit in hits.previously:
        lines.append(f"Previously believed (#{hit.note.id}, {_why_not(hit.note)}): "
                     + shorten(hit.note.text, 100))
    return "\n".join(lines)


def hits_html(hits: Hits, *, provenance: bool = False, option: str = "--min-score") -> str:
    if not len(hits):
        narrowed = getattr(hits, "filters", "")
        out = (f"<p>No notes match <code>{html.escape(hits.query)}</code>"
               + (f" with <code>{html.escape(narrowed)}</code>" if narrowed else "") + ".</p>")
    else:
        headers = ["id", "score", "age", "priority", "kind", "tags", "note"]
        if hits.explain:
            headers[2:2] = ["lexical", "dense"]
        rows = []
        for hit in hits:
            n = hit.note
            row = [f"#{n.id}", f"{hit.score:.2f}", age(n.created_at), n.priority, n.kind,
                   ", ".join(n.tags), _note_cell(n, provenance=provenance)]
            if hits.explain:
                row[2:2] = ["—" if v is None else f"{v:.3f}" for v in (hit.lexical, hit.dense)]
            rows.append(row)
        out = _table(headers, rows, raw=(len(headers) - 1,))
    out = "".join(f'<p class="nbm-muted">{html.escape(h)}</p>' for h in hits.headers) + out
    if hits.explain and hits.fusion:
        out += f'<p class="nbm-muted">{html.escape(fusion_line(hits.fusion))}</p>'
    if hits.filtered_out:
        out += (f'<p class="nbm-muted">{hits.filtered_out} more below the score threshold; '
                f"lower it with <code>{option}</code>.</p>")
    for hit in hits.previously:
        out += (f'<p class="nbm-muted">Previously believed (#{hit.note.id}, '
                f'{html.escape(_why_not(hit.note))}): <span dir="auto">'
                f"{_clamped_html(hit.note.text)}</span></p>")
    return out


class ShownHits(Hits):
    """Hits as a notebook (a table) or a terminal (text) shows them, with where each note
    came from when ``provenance`` is set. ``Memory.recall`` returns these."""

    def __init__(self, hits: Hits, *, provenance: bool = False):
        super().__init__(hits, query=hits.query, filtered_out=hits.filtered_out,
                         previously=hits.previously, explain=hits.explain,
                         behind=hits.behind, fusion=hits.fusion, as_of=hits.as_of)
        self.provenance = provenance

    filters: str | None = None  # %recall sets it: the options its line gave

    @property
    def _option(self) -> str:
        """How the caller lowers the score threshold: %recall's option, the API's argument."""
        return "min_score=" if self.filters is None else "--min-score"

    def _repr_html_(self) -> str:
        return hits_html(self, provenance=self.provenance, option=self._option)

    def _repr_pretty_(self, printer, cycle) -> None:
        printer.text(str(self))

    def __str__(self) -> str:
        """``print(hits)`` in a script: the terminal's table, with what it may lack."""
        return printable(hits_text(self, provenance=self.provenance, option=self._option))


def _why_not(note: Note) -> str:
    if note.status == "refuted" and note.resolution_reason:
        return f"refuted: {note.resolution_reason}"
    if note.status == "superseded" and note.stale:
        reason = note.stale[0]
        return f"superseded by {reason.target}" if reason.target else str(reason)
    return note.status


def notes_display(notes: Sequence[Note], *, title: str = "", total: int | None = None,
                  how: str = "") -> Rich:  # how: to see the notes not shown
    if not notes:
        return Rich(f"{title}: none." if title else "No notes.",
                    f"<p>{html.escape(title + ': none.' if title else 'No notes.')}</p>")
    lines = [title] if title else []
    for note in notes:
        lines.append(_note_header(note))
        lines.append(_clamped_text(text_of(note)))
    more = ""
    if total is not None and total > len(notes):
        more = f"({total - len(notes)} more{f': {how}' if how else ''})"
        lines.append(more)
    rows = [[f"#{n.id}", age(n.created_at), n.priority, n.kind, ", ".join(n.tags), n.status,
             _note_cell(n)] for n in notes]
    heading = f"<p><b>{html.escape(title)}</b></p>" if title else ""
    tail = f'<p class="nbm-muted">{html.escape(more)}</p>' if more else ""
    return Rich("\n".join(lines), heading + _table(
        ["id", "age", "priority", "kind", "tags", "status", "note"], rows, raw=(6,)) + tail)


def remembered_display(note: Note, similar: Sequence[Hit], *, hint: str | None = None) -> Rich:
    tags = f" [{', '.join(note.tags)}]" if note.tags else ""
    head = f"Remembered #{note.id} ({note.kind}, {note.priority}){tags}"
    if note.supersedes is not None:
        head += f", replacing #{note.supersedes}"
    text_lines, html_items = [head], []
    # The cell a note came from is its provenance, not news: say what else it is about.
    about = anchors_line(replace(note, anchors=tuple(a for a in note.anchors
                                                     if a.kind != "cell")))
    if about:
        text_lines.append(f"About: {about}")
    if hint:
        text_lines.append(f"Hint: {hint}")
    long = long_note_hint(note) if len(note.text) > LONG_NOTE else ""
    if long:
        text_lines.append(long)
    if similar:  # one line, not a paragraph per remember (a loop of 20 printed 5.7k chars)
        first, rest = similar[0], similar[1:]
        line = (f"Similar (not merged): #{first.note.id} ({first.score:.2f}) "
                + shorten(first.note.text, 60))
        if rest:
            line += "; also " + ", ".join(f"#{h.note.id} ({h.score:.2f})" for h in rest)
        text_lines.append(line)
        html_items = [f'<li>#{h.note.id} ({h.score:.2f}) <span dir="auto">'
                      f"{html.escape(shorten(h.note.text, 140))}</span></li>" for h in similar]
    body = f"<p>{html.escape(head)}</p>"
    if about:
        body += f'<p class="nbm-muted">About: {html.escape(about)}</p>'
    if hint:
        body += f'<p class="nbm-stale">Hint: {html.escape(hint)}</p>'
    if long:
        body += f'<p class="nbm-stale nbm-long">{html.escape(long)}</p>'
    if html_items:
        ids = ", ".join(f"#{h.note.id}" for h in similar)
        body += (f'<details><summary class="nbm-muted">{len(similar)} similar '
                 f'(not merged): {ids}</summary><ul>{"".join(html_items)}</ul></details>')
    return Rich("\n".join(text_lines), _STYLE + body)


def already_display(note: Note, notebook: str | None = None) -> Rich:
    """What %remember says when its cell runs again: the note that cell wrote, as it is now
    (and in which notebook, when that was another: the same cell, renamed or copied)."""
    when = f" on {local(note.created_at):%Y-%m-%d %H:%M}" if note.created_at else ""
    then = note.provenance.notebook if note.provenance else None
    if then and notebook and then != notebook:
        when = f" in {_short_path(then, note.provenance.workspace)}{when}"
    now = {"superseded": "; it is superseded since (%memory history {id} shows by what)",
           "revoked": "; it was forgotten since (%memory reinstate {id} brings it back)",
           "refuted": "; it was refuted since",
           "purged": "; it was purged since"}.get(note.status, "")
    if note.status == "active":  # Run All looked clean while the note had gone stale
        now = (f"; edited since (now version {note.version})" if note.version > 1 else "") + (
            f"; stale now: {'; '.join(map(str, note.stale))}" if note.stale else "")
    text = (f"Already remembered as #{note.id} by this cell{when}{now.format(id=note.id)}: "
            f"not written again. (Change the line to write a new note.)")
    return Rich(text, _STYLE + f'<p class="nbm-muted">{html.escape(text)}</p>')


def _waiting(count: int) -> str:
    """Notes written while the model loaded, not yet embedded."""
    if not count:
        return ""
    return ("; 1 new note waits for its vector" if count == 1
            else f"; {count} new notes wait for their vectors")


def status_display(status: dict[str, Any]) -> Rich:
    recalls, empty = status.get("recalls", 0), status.get("empty_recalls", 0)
    rate = (f"{empty}/{recalls} ({100 * empty / recalls:.0f}%)" if recalls else
            "unknown while the server is away" if recalls is None else "no recalls yet")
    by_status = status.get("by_status", {})
    other = ", ".join(f"{v} {k}" for k, v in sorted(by_status.items()) if k != "active")
    rows = [
        ("store", f"{status['store']}" + (f" ({status['store_reason']})" if status.get("store_reason") else "")),
        ("notes", f"{status['notes']} active" + (f", {other}" if other else "")),
        ("snapshots", "unknown while the server is away" if status.get("snapshots", 0) is None
                      else str(status.get("snapshots", 0))),
        ("model", status["model"] + ("" if status.get("model_loaded") else
                                     " (loading: recall answers from keywords meanwhile)"
                                     if status.get("model_loading") else " (not loaded yet)")
                  + _waiting(status.get("unembedded", 0))),
        ("index", f"{status['index']}; {status['vectors']} vectors, {status['lexical_docs']} keyword docs"
                  + (f" (keywords {status['keywords']})" if status.get("keywords") not in (None, status["index"]) else "")),
        ("empty recalls", rate),
        ("owner", f"pid {status['pid']}, up {status['uptime_s']:.0f} s"
                  + (f", queue {status['queue']}" if "queue" in status else "")
                  + (f", {_transport(status)}" if status.get("transport") else "")),
        ("version", f"nbmemory {status['version']}, schema {status['schema_version']}"),
    ]
    if status.get("unreachable"):
        rows.insert(1, ("server", f"{status['unreachable']} Reads answer from this machine's "
                                  "copy meanwhile."))
    if status.get("read_only"):
        rows.insert(1, ("access", "read only: your PostgreSQL role may read this team store, "
                                  "not write it"))
    if status.get("mismatch"):
        rows.append(("warning", f"configured model {status['configured_model']!r} differs from "
                                "the store's; re-embed: %memory reembed, or in a shell "
                                "nbmemory reindex --reembed"))
    size = max(len(k) for k, _ in rows)
    text = "\n".join(f"{k.ljust(size)}  {v}" for k, v in rows)
    return Rich(text, _table(["", ""], rows))


def _transport(status: dict[str, Any]) -> str:
    if status["transport"] == "tcp":
        return f"TCP 127.0.0.1:{status.get('port')} with a secret"
    return "unix socket"


def snapshots_display(snapshots: Sequence[Snapshot]) -> Rich:
    if not snapshots:
        return Rich("No snapshots yet. Seal one with %snapshot NAME -m 'why'.",
                    "<p>No snapshots yet. Seal one with <code>%snapshot NAME -m 'why'</code>.</p>")
    rows = [(s.name, local(s.at).strftime("%Y-%m-%d %H:%M") if s.at else "", str(s.note_count),
             s.message, s.author or "") for s in snapshots]
    size = max(width(r[0]) for r in rows)
    text = "\n".join(f"{ljust(r[0], size)}  {r[1]}  {r[2]:>5} "  # "note " aligns with "notes"
                     f"{'note ' if r[2] == '1' else 'notes'}  {r[3]}" for r in rows)
    return Rich(text, _table(["name", "sealed", "notes", "message", "author"], rows))


def _detail(data: dict) -> str:
    """An event's data as words on one line (rows stay whole): ``changed=text, tags``."""
    return " ".join("; ".join(f"{k}={', '.join(map(str, v)) if isinstance(v, list) else v}"
                              for k, v in data.items()).split())


def history_display(note_id: int, events: Sequence[Event], chain: Sequence[Note] = (),
                    versions: Sequence[Note] = ()) -> Rich:
    """The journal of a note, its supersede chain, and what each version said (if edited)."""
    header = ("seq", "time", "event", "actor", "detail")
    rows = [(str(e.seq), local(e.at).strftime("%Y-%m-%d %H:%M:%S") if e.at else "", e.type,
             e.actor or "", _detail(e.data)) for e in events]
    widths = [max(width(r[i]) for r in [header, *rows]) for i in range(4)]
    lines = ["  ".join(ljust(c, w) for c, w in zip(r, widths)) + "  " + r[4]
             for r in [header, *rows]]
    text = f"History of #{note_id}\n" + "\n".join(line.rstrip() for line in lines)
    body = f"<p><b>History of #{note_id}</b></p>" + _table(list(header), rows)
    if len(chain) > 1:
        links = " -> ".join(f"#{n.id} ({n.status})" for n in chain)
        text += f"\nSupersede chain: {links}"
        body += f"<p>Supersede chain: {html.escape(links)}</p>"
    if len(versions) > 1:
        heads = [f"v{v.version}, {local(v.updated_at):%Y-%m-%d %H:%M}" + (f" by {v.author}" if
                 v.author else "") + f" ({', '.join([v.kind, v.priority, *v.tags])})" for v in versions]
        text += "\nVersions" + "".join(
            f"\n{head}:\n" + textwrap.indent(v.text, "    ") for head, v in zip(heads, versions))
        body += "<p><b>Versions</b></p>" + "".join(
            f'<p class="nbm-muted">{html.escape(head)}</p><blockquote dir="auto">'
            f"{html.escape(v.text)}</blockquote>" for head, v in zip(heads, versions))
    return Rich(text, body)


_CHANGE_TITLES = {"added": "Added", "edited": "Edited", "superseded": "Superseded",
                  "revoked": "Forgotten", "refuted": "Refuted", "reinstated": "Reinstated", "purged": "Purged",
                  "became_stale": "Became stale", "stale_anew": "Still stale, for new reasons",
                  "no_longer_stale": "No longer stale"}


def diff_display(result: SnapshotDiff) -> Rich:
    head = f"From {result.a!r} to {result.b!r}"
    if not result.changes:
        return Rich(f"{head}: no changes.", f"<p>{html.escape(head)}: no changes.</p>")
    lines, parts = [head], [f"<p><b>{html.escape(head)}</b></p>"]
    for change in CHANGES:
        rows = [c for c in result.changes if c.change == change]
        if not rows:
            continue
        lines.append(f"{_CHANGE_TITLES[change]} ({len(rows)}):")
        items = []
        for c in rows:
            detail = f" [{c.detail}]" if c.detail else ""
            text = text_of(c.note)
            lines.append(f"  #{c.note.id}{detail} " + shorten(text, 90))
            items.append(f'<li>#{c.note.id}{html.escape(detail)} <span dir="auto">'
                         f"{html.escape(shorten(text, 300))}</span></li>")
        parts.append(f"<p>{_CHANGE_TITLES[change]} ({len(rows)}):</p><ul>{''.join(items)}</ul>")
    return Rich("\n".join(lines), _STYLE + "".join(parts))


# -- ambient recall ----------------------------------------------------------------------

def _unique_notes(groups: Sequence[tuple[str, Sequence[Note], int]]) -> list[Note]:
    seen: dict[int, Note] = {}
    for _, notes, _ in groups:
        for note in notes:
            seen.setdefault(note.id, note)
    return list(seen.values())


def ambient_line(groups: Sequence[tuple[str, Sequence[Note], int]]) -> str:
    """``nbmemory: 2 notes about data/orders.csv (1 stale)``"""
    notes = _unique_notes(groups)
    labels = list(dict.fromkeys(what for what, _, _ in groups))
    if len(labels) > 3:
        about = f"{', '.join(labels[:2])} and {len(labels) - 2} more"
    elif len(labels) > 1:
        about = f"{', '.join(labels[:-1])} and {labels[-1]}"
    else:
        about = labels[0] if labels else "this cell"
    noun = "gotcha" if notes and all(n.kind == "gotcha" for n in notes) else "note"
    more = sum(m for _, _, m in groups)
    count = f"{len(notes)}{'+' if more else ''}"
    line = f"nbmemory: {count} {noun}{'' if len(notes) == 1 and not more else 's'} about {about}"
    stale = sum(1 for n in notes if n.stale)
    return line + (f" ({stale} stale)" if stale else "")


def ambient_display(groups: Sequence[tuple[str, Sequence[Note], int]], *, why: str = "") -> Rich:
    """One line under a cell: plain text with the note ids, or an HTML ``<details>`` that
    opens to the notes."""
    line = ambient_line(groups)
    ids = ", ".join(f"#{n.id}" for n in _unique_notes(groups))
    text = f"{line}: {ids} (%memory ambient show)"
    body = _ambient_body(groups, why)
    return Rich(text, f'{_STYLE}<details class="nbm-ambient"><summary class="nbm-muted">'
                      f"{html.escape(line)}</summary>{body}</details>")


def _ambient_body(groups, why: str) -> str:
    parts = []
    for what, notes, more in groups:
        rows = [[f"#{n.id}", age(n.created_at), n.priority, n.kind, ", ".join(n.tags),
                 _note_cell(n, provenance=False)] for n in notes]
        parts.append(f"<p>About <code>{html.escape(what)}</code>:</p>"
                     + _table(["id", "age", "priority", "kind", "tags", "note"], rows, raw=(5,)))
        if more:
            parts.append(f'<p class="nbm-muted">{more} more; %recall for the rest.</p>')
    if why:
        parts.append(f'<p class="nbm-muted">The error matched by {html.escape(why)}.</p>')
    return "".join(parts)


def ambient_notes_display(groups: Sequence[tuple[str, Sequence[Note], int]]) -> Rich:
    """The notes behind the last ambient line, for ``%memory ambient show``."""
    lines = [ambient_line(groups)]
    for what, notes, more in groups:
        lines.append(f"About {what}:")
        for note in notes:
            lines.append("  " + _note_header(note))
            lines.append(_wrap(note.text))
        if more:
            lines.append(f"  ({more} more; %recall for the rest)")
    return Rich("\n".join(lines), _STYLE + f"<p>{html.escape(lines[0])}</p>"
                + _ambient_body(groups, ""))
