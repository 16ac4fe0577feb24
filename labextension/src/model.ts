/**
 * The panel's model: its state (`MemoryState`) and all that changes it: the view, query,
 * filters and page, the new-note form and the edits, and the writes (which other
 * extensions make too, through INbMemory).
 */

import { ISignal, Signal } from '@lumino/signaling';

import { describeStale } from './describe';
import { changedFields, clashes, draftOf, EditFields, IDraft, newDraft } from './drafts';
import { EMPTY_FILTERS, filterParams, tagList } from './filters';
import { ApiError, json } from './request';
import { IPanelState, MemoryState, View } from './state';
import { INotesOptions, IRecallOptions, IRememberOptions } from './tokens';
import {
  IFilters,
  IHits,
  INote,
  INoteDetail,
  IPage,
  ISnapshotDiff,
  ISource
} from './types';

/** The most hits the server gives for one recall (`k`). */
export const MAX_HITS = 500;

/**
 * The panel's state and every call it makes to the server: what it shows and how it is
 * loaded (`MemoryState`), and here what changes it.
 *
 * Views read the public fields and re-render on `changed`, and call the methods; they
 * never call the API.
 */
export class MemoryModel extends MemoryState {
  /** Emitted when the view, query or filters change (the plugin saves them). */
  get stateChanged(): ISignal<this, IPanelState> {
    return this._stateChanged;
  }

  /** Emitted after a note was written from this JupyterLab (panel, command, token). */
  get noteWritten(): ISignal<this, INote> {
    return this._noteWritten;
  }

  setView(view: View): void {
    if (view === this.view) {
      return;
    }
    this.view = view;
    this._stateChanged.emit(this.state);
    void this.refresh();
  }

  setQuery(query: string): void {
    if (query.trim() === this.query.trim()) {
      this.query = query; // the same search: its page of hits ("More") stays
      return;
    }
    this.query = query;
    this._firstPage();
    this._stateChanged.emit(this.state);
    void this.refresh();
  }

  /**
   * The search box's Enter: a new query, or the same one asked again (what a keyword-only
   * answer, given while the model loads, asks the user to do).
   */
  search(query: string): void {
    if (query.trim() !== this.query.trim()) {
      this.setQuery(query);
    } else if (query.trim()) {
      this.query = query;
      void this.refresh(); // an identical recall on its way is shared, not sent twice
    }
  }

  setFilters(filters: Partial<IFilters>): void {
    const next = { ...this.filters, ...filters };
    if (JSON.stringify(next) === JSON.stringify(this.filters)) {
      return;
    }
    this.filters = next;
    this._firstPage();
    this._stateChanged.emit(this.state);
    void this.refresh();
  }

  /** A tag chip: add the tag to the tag filter, or take it out if it is in. */
  toggleTag(tag: string): void {
    const tags = tagList(this.filters.tags);
    const next = tags.includes(tag) ? tags.filter(t => t !== tag) : [...tags, tag];
    this.setFilters({ tags: next.join(',') });
  }

  clearFilters(): void {
    this.query = '';
    this.filters = { ...EMPTY_FILTERS };
    this._firstPage();
    this._stateChanged.emit(this.state);
    void this.refresh();
  }

  /** Recall a page more of hits. */
  moreHits(): Promise<void> {
    this.recallSize = Math.min(this.recallSize + this.pageSize, MAX_HITS);
    return this.refresh();
  }

  /** Show the hits below the score threshold too (until the query changes). */
  showBelow(): Promise<void> {
    this.belowShown = true;
    return this.refresh();
  }

  private _firstPage(): void {
    this.offset = 0;
    this.recallSize = this.pageSize;
    this.belowShown = false;
  }

  setPage(offset: number): Promise<void> {
    this.offset = Math.max(0, offset);
    return this.refresh();
  }

  // -- the new-note form ----------------------------------------------------------------

  /**
   * Open the new-note form with `draft`; a form that holds typing not yet saved keeps it
   * (the form takes the focus). To replace that, cancel it first.
   */
  startDraft(draft: Partial<IDraft> = {}): void {
    if (this.readOnly) {
      this.say(this.readOnlyMessage);
      return;
    }
    const replaced = !this.drafting;
    if (replaced) {
      this.draft = this.draftStart = newDraft(draft);
      this.draftFailure = null;
      this._draftSeq++;
    }
    this._draftStarted.emit(replaced);
    this._emit();
  }

  /** What the new-note form holds now (kept when the form is hidden, a tab switch). */
  updateDraft(draft: IDraft): void {
    if (this.draft) {
      this.draft = draft;
    }
  }

  /** Whether the new-note form holds typing, or a note whose save failed, not yet saved. */
  get drafting(): boolean {
    const { draft, draftStart: start } = this;
    return (
      !!draft &&
      !!start &&
      (!!this.draftFailure ||
        draft.text.trim() !== start.text.trim() ||
        draft.kind !== start.kind ||
        draft.priority !== start.priority ||
        draft.tags !== start.tags)
    );
  }

  /**
   * Whether an editor holds typing not yet saved (a new note's or an edit's), for the
   * page's "leave site?" warning; each editor says so under its own `key`.
   */
  setUnsaved(key: object, unsaved: boolean): void {
    const before = this._unsaved.size > 0;
    if (unsaved) {
      this._unsaved.add(key);
    } else {
      this._unsaved.delete(key);
    }
    if (before !== this._unsaved.size > 0) {
      this._unsavedChanged.emit(this._unsaved.size > 0);
    }
  }

  /** Emitted when the panel starts or stops holding unsaved typing. */
  get unsavedChanged(): ISignal<this, boolean> {
    return this._unsavedChanged;
  }

  /** Emitted when the form is asked for (it takes the focus): true if with a new draft. */
  get draftStarted(): ISignal<this, boolean> {
    return this._draftStarted;
  }

  cancelDraft(): void {
    this.draft = this.draftStart = this.draftFailure = null;
    this._draftSeq++;
    this._emit();
  }

  /** Remember the new note's form; the note, or null when it was not stored (said). */
  async saveDraft(draft: IDraft): Promise<INote | null> {
    this.draftFailure = null;
    const seq = this._draftSeq; // another draft may replace this one while it is sent
    try {
      const note = await this.remember(draft.text, {
        kind: draft.kind,
        priority: draft.priority,
        tags: tagList(draft.tags),
        provenance: draft.provenance
      });
      if (seq === this._draftSeq) {
        this.draft = this.draftStart = null;
        this._draftSeq++;
      }
      this._notices.close(this._notices.seq, false);
      await this.refresh({ status: true }); // the one remember() sent, not another
      const listed = (this.hits?.map(hit => hit.note) ?? this.notes).some(n => n.id === note.id);
      const narrowed =
        !!this.query.trim() || !!this.filters.stale || filterParams(this.filters).length > 0;
      this.say(
        listed || !narrowed
          ? this.trans.__('Remembered #%1.', note.id)
          : this.trans.__(
              'Remembered #%1. The search or the filters hide it: clear them to see it.',
              note.id
            ),
        'success'
      );
      return note;
    } catch (error) {
      const said = this.fail(
        error,
        this.trans.__('Your note is kept in the form; save it once the server is back.')
      );
      if (seq === this._draftSeq) {
        this.draftFailure = said;
      }
      this._emit();
      return null;
    }
  }

  // -- editing a note ------------------------------------------------------------------

  startEdit(note: INote): void {
    this.edits.set(note.id, { base: note, draft: draftOf(note) });
    this._emit();
  }

  /** What the editor holds now (no re-render: the editor shows it already). */
  updateEdit(id: number, draft: IDraft): void {
    const edit = this.edits.get(id);
    if (edit) {
      edit.draft = draft;
    }
  }

  endEdit(id: number): void {
    if (this.edits.delete(id)) {
      this._emit();
    }
  }

  /**
   * Save an edit as a new version: only the fields changed since the editor opened, so a
   * change written elsewhere meanwhile (another field) is kept, not undone. When one of
   * those fields changed elsewhere too, nothing is written: the edit shows the other
   * version (`conflict`) until `over` saves this one over it, or the edit is cancelled.
   */
  async saveEdit(id: number, draft: IDraft, over = false): Promise<boolean> {
    const edit = this.edits.get(id);
    if (!edit) {
      return false;
    }
    if (over && edit.conflict) {
      edit.base = edit.conflict.note; // seen: this version is what the edit replaces
    }
    edit.conflict = edit.failure = undefined;
    const { base } = edit;
    const fields = changedFields(base, draft);
    if (Object.keys(fields).length === 0) {
      this.endEdit(id);
      return true;
    }
    this.updateEdit(id, draft);
    for (let attempt = 0; attempt < 3; attempt++) {
      let now: INote;
      try {
        now = (await this.detail(id)).note;
      } catch (error) {
        edit.failure = this.fail(
          error,
          this.trans.__('Your edit is kept; save it once the server is back.')
        );
        this._emit();
        return false;
      }
      const clashing = clashes({ ...edit, draft }, now);
      if (clashing.length) {
        edit.conflict = { note: now, fields: clashing };
        this._emit();
        return false;
      }
      try {
        // Only over the version just read: one written in between is a 409, read again.
        const note = await this._request<INote>(
          `notes/${id}`,
          json('PATCH', { ...fields, version: now.version }),
          'edit'
        );
        this._notices.close(this._notices.seq, false);
        this.say(this._saved(note, now.version), 'success');
      } catch (error) {
        // A version written in between: read it again. Not a note forgotten meanwhile
        // (also a 409): saying that once is enough.
        const raced = error instanceof ApiError && error.status === 409;
        if (raced && attempt < 2 && now.status === 'active') {
          continue;
        }
        edit.failure = this.fail(
          error,
          this.trans.__('Your edit is kept; save it once the server is back.')
        );
        this._emit();
        return false;
      }
      this.endEdit(id);
      await this.refresh({ force: true, status: true });
      return true;
    }
    return false;
  }

  // -- the API, for the panel and for other extensions (INbMemory) --------------------

  async remember(text: string, options: IRememberOptions = {}): Promise<INote> {
    const body: Record<string, unknown> = { text };
    for (const name of ['kind', 'priority', 'tags', 'provenance'] as const) {
      if (options[name] !== undefined) {
        body[name] = options[name];
      }
    }
    const note = await this._request<INote>('notes', json('POST', body), 'remember');
    this._noteWritten.emit(note);
    void this.refresh({ force: true, status: true });
    return note;
  }

  async recallNotes(query: string, options: IRecallOptions = {}): Promise<IHits> {
    const params = [this._queryParam(query)];
    for (const [name, value] of Object.entries(options)) {
      if (value !== undefined && value !== '') {
        params.push(`${name}=${encodeURIComponent(String(value))}`);
      }
    }
    return this._request<IHits>(`recall?${params.join('&')}`, {}, 'recall');
  }

  listNotes(options: INotesOptions = {}): Promise<IPage> {
    const params = Object.entries(options)
      .filter(([, value]) => value !== undefined && value !== '')
      .map(([name, value]) => `${name}=${encodeURIComponent(String(value))}`);
    return this._request<IPage>(`notes${params.length ? '?' + params.join('&') : ''}`);
  }

  async detail(id: number): Promise<INoteDetail> {
    return this._request<INoteDetail>(`notes/${id}`);
  }

  /** Is the note's notebook still there, and where did its cell go if not. */
  async source(id: number): Promise<ISource> {
    return this._request<ISource>(`notes/${id}/source`);
  }

  /** Write a new version of a note. */
  async edit(id: number, fields: EditFields): Promise<boolean> {
    return this._act(async () => {
      const note = await this._request<INote>(`notes/${id}`, json('PATCH', fields), 'edit');
      this.say(this._saved(note), 'success');
    });
  }

  /** What a save did: a new version, or nothing; a stale flag stays until verified. */
  private _saved(note: INote, before?: number): string {
    if (note.version === before) {
      return this.trans.__('Nothing to save: #%1 is as it was.', note.id);
    }
    const saved = this.trans.__('Saved #%1 as version %2.', note.id, note.version);
    if (!note.stale.length) {
      return saved;
    }
    // A failed check's flag goes when the check passes again, not when it is verified.
    const check = (r: { reason: string }) => ['check_failed', 'check_error'].includes(r.reason);
    const checks = note.stale.filter(check).length;
    return `${saved} ${
      checks === note.stale.length
        ? this.trans.__('It stays flagged stale until its check passes again.')
        : checks
          ? this.trans.__(
              'It stays flagged stale until you verify it and its check passes again.'
            )
          : this.trans.__('It stays flagged stale until you verify it.')
    }`;
  }

  /** Forget (revoke) a note; the notice offers Undo for a while. */
  async forget(id: number): Promise<boolean> {
    return this._act(async () => {
      await this._request<INote>(`notes/${id}/forget`, json('POST'));
      this.forgotten = id;
      // The toast's Undo does nothing once the forget was undone another way (the list's).
      const offer: string = this._notices.offerUndo(
        this.trans.__('Forgot #%1.', id),
        this.trans.__('Undo'),
        this.trans.__('Bring #%1 back', id),
        () => void (this._undoOffers.get(id) === offer && this.undoForget(id))
      );
      this._undoOffers.set(id, offer);
    });
  }

  async undoForget(id: number): Promise<boolean> {
    return this._act(async () => {
      await this._request<INote>(`notes/${id}/reinstate`, json('POST'));
      if (this.forgotten === id) {
        this.forgotten = null;
      }
      const offer = this._undoOffers.get(id); // undone from the list: its toast goes too
      if (offer !== undefined) {
        this._undoOffers.delete(id);
        this._notices.dismiss(offer);
      }
      this.say(this.trans.__('Reinstated #%1.', id), 'success');
    });
  }

  async verify(id: number): Promise<boolean> {
    return this._act(async () => {
      const result = await this._request<any>(`notes/${id}/verify`, json('POST'));
      const note: INote | undefined = result?.note ?? (result?.id ? result : undefined);
      if (note && !note.stale?.length && note.anchors?.length === 0) {
        this.say(
          this.trans.__(
            'Verified #%1: it is about no file, data or cell, so there was nothing to re-check.',
            id
          ),
          'success'
        );
      } else if (note && note.stale && note.stale.length) {
        this.say(
          this.trans.__(
            '#%1 is still stale: %2',
            id,
            note.stale.map(r => describeStale(r, this.trans)).join('; ')
          )
        );
      } else {
        this.say(
          this.trans.__('Verified #%1: re-took the fingerprints of what it is about.', id),
          'success'
        );
      }
    });
  }

  /** Compare two snapshots; a refusal is shown where the diff would be (a toast cuts it). */
  async diffSnapshots(from: string, to: string): Promise<void> {
    this.diffNames = [from, to];
    try {
      const query =
        `from=${encodeURIComponent(from)}` + (to ? `&to=${encodeURIComponent(to)}` : '');
      this.diff = await this._request<ISnapshotDiff>(`snapshots/diff?${query}`);
      this.diffError = null;
    } catch (error) {
      this.diff = null;
      this.diffError = this.wordsOf(error);
    }
    this._emit();
  }

  // -- internals ------------------------------------------------------------------------

  private async _act(action: () => Promise<void>): Promise<boolean> {
    const seq = this._notices.seq;
    try {
      await action();
    } catch (error) {
      this.fail(error);
      this._emit();
      return false;
    }
    this._notices.close(seq, false);
    await this.refresh({ force: true, status: true });
    return true;
  }

  private _stateChanged = new Signal<this, IPanelState>(this);
  private _noteWritten = new Signal<this, INote>(this);
  private _draftStarted = new Signal<this, boolean>(this);
  private _draftSeq = 0; // which draft the form holds: a save answers for its own only
  private _unsaved = new Set<object>();
  private _undoOffers = new Map<number, string>();
  private _unsavedChanged = new Signal<this, boolean>(this);
}
