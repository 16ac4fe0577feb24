"""``%memory browse``: an in-notebook browser for front ends without the JupyterLab panel.

Built with ipywidgets (VS Code, Colab, classic notebooks): a search box that runs recall,
filters, one row per note with its stale badge and provenance, forget (with undo) and
verify buttons. Every action goes through the same :class:`~nbmemory.memory.Memory` API.
Where ipywidgets is missing, :func:`browse` returns the static HTML table instead.
All note text is escaped before it reaches HTML.
"""

from __future__ import annotations

import html
from typing import Any, Sequence

from . import display as show, wording
from .errors import NbMemoryError
from .models import KINDS, PRIORITIES, Note
from .syntax import MAGIC

STALE_CHOICES = (("stale or fresh", ""), ("stale only", "stale"), ("fresh only", "fresh"))


def note_html(note: Note, score: float | None = None) -> str:
    """One note as escaped HTML: header, text, stale reasons, provenance. Its text and tags
    take their direction from themselves (Hebrew reads right to left)."""
    bits = [f"<b>#{note.id}</b>", html.escape(note.priority), html.escape(note.kind),
            html.escape(wording.age(note.created_at))]
    if score is not None:
        bits.append(f"{score:.2f}")
    if note.tags:
        bits.append(f'<span dir="auto">{html.escape(", ".join(note.tags))}</span>')
    if note.status != "active":
        bits.append(html.escape(note.status.upper()))
    stale = ""
    if note.stale:
        stale = (' <span class="nbm-stale">stale: '
                 + html.escape("; ".join(str(r) for r in note.stale)) + "</span>")
    text = html.escape(note.text).replace("\n", "<br>")
    where = html.escape(wording.provenance_line(note))
    return (f'<div class="nbm-browse-note"><div class="nbm-muted">{" · ".join(bits)}{stale}</div>'
            f'<div dir="auto">{text}</div><div class="nbm-muted">from {where}</div></div>')


class MemoryBrowser:
    """The widget browser. ``browser.widget`` is the ipywidgets tree; display the browser itself."""

    def __init__(self, memory, *, limit: int = 20, tags: str | None = None,
                 kind: str | None = None, priority: str | None = None):
        import ipywidgets as w

        self.memory = memory
        self.limit = limit
        self.rows: list[Note] = []
        self.summary = ""
        self.search = w.Text(placeholder="Recall: ask in any words…", description="",
                             layout=w.Layout(flex="1 1 auto", width="auto"))
        self.search_button = w.Button(description="Recall", icon="search")
        self.tags = w.Text(value=tags or "", placeholder="tags, comma-separated",
                           layout=w.Layout(width="180px"))
        self.kind = w.Dropdown(options=[("any kind", "")] + [(k, k) for k in KINDS],
                               value=_choice(kind, KINDS), layout=w.Layout(width="130px"))
        self.priority = w.Dropdown(options=[("any priority", "")] + [(p, p) for p in PRIORITIES],
                                   value=_choice(priority, PRIORITIES),
                                   layout=w.Layout(width="130px"))
        self.stale = w.Dropdown(options=STALE_CHOICES, value="", layout=w.Layout(width="140px"))
        self.message = w.HTML()
        self.undo: Any = None
        self.notice = w.HBox([self.message])
        self.results = w.VBox()
        self.status = w.HTML()
        # Text sends its value on Enter or blur, not on every key.
        self.search.continuous_update = False
        self.search.observe(lambda _: self.refresh(), names="value")
        self.search_button.on_click(lambda _: self.refresh())
        for control in (self.tags, self.kind, self.priority, self.stale):
            control.observe(lambda _: self.refresh(), names="value")
        self.tags.continuous_update = False
        self.widget = w.VBox([
            w.HTML(show._STYLE),
            w.HBox([self.search, self.search_button]),
            w.HBox([self.tags, self.kind, self.priority, self.stale]),
            self.notice, self.results, self.status,
        ])
        self.refresh()

    def _ipython_display_(self) -> None:
        from IPython.display import display

        bundle = self.widget._repr_mimebundle_()
        # A terminal shows only text/plain: the notes listed, not the widget tree's repr.
        bundle["text/plain"] = show.notes_display(self.rows, title=self.summary).text
        display(bundle, raw=True)

    # -- actions ------------------------------------------------------------------------

    def say(self, text: str, error: bool = False) -> None:
        css = "nbm-stale" if error else "nbm-muted"
        self.message.value = f'<span class="{css}">{html.escape(text)}</span>' if text else ""

    def _filters(self) -> dict[str, Any]:
        return {"tags": self.tags.value or None, "kind": self.kind.value or None,
                "priority": self.priority.value or None}

    def refresh(self) -> None:
        """Recall when the search box has text, else list the newest notes."""
        try:
            query = self.search.value.strip()
            wanted = self.stale.value
            stale = None if not wanted else wanted == "stale"
            if query:
                hits = self.memory.recall(query, k=self.limit, stale=stale, **self._filters())
                items = [(h.note, h.score) for h in hits]
                summary = f"{len(items)} recalled for {query!r}"
                if hits.filtered_out:
                    summary += f" ({hits.filtered_out} more below the score threshold)"
            else:
                page = self.memory.notes(limit=self.limit, stale=stale, **self._filters())
                items = [(n, None) for n in page.notes]
                summary = wording.counted(page.total, "note") + (f", newest {len(items)} shown"
                                                   if page.total > len(items) else "")
            self._show(items)
            self.summary = summary
            self.status.value = f'<span class="nbm-muted">{html.escape(summary)} · ' \
                                f'{html.escape(str(self.memory.location or ""))}</span>'
        except NbMemoryError as exc:
            self.say(exc.render(MAGIC), error=True)

    def _show(self, items: Sequence[tuple[Note, float | None]]) -> None:
        import ipywidgets as w

        self.rows = [note for note, _ in items]
        rows = []
        for note, score in items:
            forget = w.Button(description="Forget", layout=w.Layout(width="80px"))
            verify = w.Button(description="Verify", layout=w.Layout(width="80px"))
            forget.on_click(lambda _, i=note.id: self.forget(i))
            verify.on_click(lambda _, i=note.id: self.verify(i))
            rows.append(w.HBox([w.HTML(note_html(note, score), layout=w.Layout(flex="1 1 auto")),
                                w.VBox([forget, verify])]))
        if not rows:
            rows.append(w.HTML('<p class="nbm-muted">No notes match.</p>'))
        self.results.children = rows

    def forget(self, note_id: int) -> None:
        import ipywidgets as w

        try:
            self.memory.forget(note_id)
        except NbMemoryError as exc:
            self.say(exc.render(MAGIC), error=True)
            return
        self.refresh()
        undo = w.Button(description=f"Undo forget #{note_id}")
        undo.on_click(lambda _: self.reinstate(note_id))
        self.say(f"Forgot #{note_id}.")
        self.undo = undo
        self.notice.children = (self.message, undo)

    def reinstate(self, note_id: int) -> None:
        try:
            self.memory.reinstate(note_id)
        except NbMemoryError as exc:
            self.say(exc.render(MAGIC), error=True)
            return
        self.undo = None
        self.notice.children = (self.message,)
        self.say(f"Reinstated #{note_id}.")
        self.refresh()

    def verify(self, note_id: int) -> None:
        if not hasattr(self.memory, "verify"):
            self.say("This nbmemory cannot verify notes yet; upgrade nbmemory.", error=True)
            return
        try:
            result = self.memory.verify(note_id)
        except NbMemoryError as exc:
            self.say(exc.render(MAGIC), error=True)
            return
        note = getattr(result, "note", result)
        stale = getattr(note, "stale", ())
        self.say(f"#{note_id} is still stale: " + "; ".join(map(str, stale)) if stale
                 else f"Verified #{note_id}.")
        self.refresh()


def _choice(value: str | None, choices) -> str:
    """The choice ``value`` names as a filter reads it (``Gotcha``, ``h`` for high); "" for
    any. The store has refused what names none."""
    value = (value or "").strip().lower()
    return next((c for c in choices if c == value), None) or next(
        (c for c in choices if value and c.startswith(value)), "")


def browse(memory, *, limit: int = 20, tags: str | None = None, kind: str | None = None,
           priority: str | None = None):
    """The widget browser, or the static HTML table when ipywidgets is not installed."""
    try:
        import ipywidgets  # noqa: F401
    except ImportError:
        page = memory.notes(tags=tags, kind=kind, priority=priority, limit=limit)
        return show.notes_display(page.notes, total=page.total,
                                  title=f"{wording.counted(page.total, 'active note')} "
                                        "(install ipywidgets for the interactive browser)")
    return MemoryBrowser(memory, limit=limit, tags=tags, kind=kind, priority=priority)
