import { Notification } from '@jupyterlab/apputils';
import { nullTranslator, TranslationBundle } from '@jupyterlab/translation';
import { ISignal, Signal } from '@lumino/signaling';

import { isTeamStore } from './address';
import { ApiError, json, requestAPI } from './request';
import {
  INotesOptions,
  IRecallOptions,
  IRememberOptions,
  INoteSource
} from './tokens';
import {
  ICheck,
  IFilters,
  IHit,
  IHits,
  INote,
  INoteDetail,
  IOwnerState,
  IPage,
  ISnapshot,
  ISnapshotDiff,
  ISource,
  IStatus,
  IVersion
} from './types';

// The version of this frontend, compared with the server extension's.
import packageInfo from '../package.json';

export const FRONTEND_VERSION: string = packageInfo.version;

export type View = 'notes' | 'snapshots';

/** Why a request is slow, as the panel says it. */
export type Phase = 'starting' | 'loading-model' | 'working' | null;

/** What the panel keeps across reloads (IStateDB). */
export interface IPanelState {
  view: View;
  query: string;
  filters: IFilters;
}

/** A note being written in the panel's "New note" form. */
export interface IDraft {
  text: string;
  kind: string;
  priority: string;
  tags: string;
  provenance?: INoteSource;
  /** Where it comes from, as the form shows it ("analysis.ipynb, cell [4]"). */
  where?: string;
}

/** A note being edited: the version it was opened at, and what the editor holds now. */
export interface IEdit {
  base: INote;
  draft: IDraft;
  /** Set when a save found the fields it changes changed elsewhere too: the note now. */
  conflict?: { note: INote; fields: string[] };
}

type EditFields = { text?: string; priority?: string; kind?: string; tags?: string[] };

/** A field of a note as an edit compares and shows it (a list joined by `separator`). */
export function fieldOf(note: INote, name: string, separator = ','): string {
  const value = (note as unknown as Record<string, unknown>)[name];
  return Array.isArray(value) ? value.join(separator) : String(value);
}

/** After this long a request asks the server why it is slow (`GET owner`). */
const SLOW_MS = 700;
const OWNER_POLL_MS = 1000;
/** How long the Undo of a forget stays offered. */
export const UNDO_MS = 10000;
const INFO_MS = 5000;
/** The most hits the server gives for one recall (`k`). */
export const MAX_HITS = 500;
/** Operations that need the embedding model (the first one after a start loads it). */
const EMBEDS = new Set(['recall', 'remember', 'supersede', 'edit']);

export const EMPTY_FILTERS: IFilters = {
  tags: '',
  kind: '',
  priority: '',
  stale: '',
  mine: false,
  author: ''
};

/** The comma-separated tags of a filter box, trimmed, without empties or repeats. */
export function tagList(value: string): string[] {
  const tags: string[] = [];
  for (const tag of value.split(',').map(t => t.trim())) {
    if (tag && !tags.includes(tag)) {
      tags.push(tag);
    }
  }
  return tags;
}

/**
 * The panel's state and every call it makes to the server.
 *
 * Views read the public fields and re-render on `changed`; they never call the API.
 * Each request is sent once: identical refreshes in flight are shared, and the poll asks
 * for the status only (without starting the store's owner).
 */
export class MemoryModel {
  constructor(trans?: TranslationBundle) {
    this.trans = trans ?? nullTranslator.load('nbmemory');
    this._ready = new Promise(resolve => (this._resolveReady = resolve));
  }

  readonly trans: TranslationBundle;
  /** Compatibility of the server extension: null until checked. */
  compatibility: { ok: boolean; message: string } | null = null;
  view: View = 'notes';
  query = '';
  filters: IFilters = { ...EMPTY_FILTERS };
  pageSize = 25;
  /** How many hits a recall asks for: a page, and a page more each time "More" is asked. */
  recallSize = 25;
  /** Whether recall also shows the notes below the score threshold (until the query changes). */
  belowShown = false;
  offset = 0;
  notes: INote[] = [];
  total = 0;
  /** Recall results when a query is set, else null. */
  hits: IHit[] | null = null;
  /** The query `hits` answer (the box may hold a newer one while it is asked). */
  hitsQuery = '';
  filteredOut = 0;
  previously: IHit[] = [];
  /** Why the last recall may miss recent notes (a team store's server was away). */
  behind: string | null = null;
  /** The note forgotten last, until it is brought back or another is: Undo in the panel
   * (the toast's Undo is far away in the tab order, and gone after UNDO_MS). */
  forgotten: number | null = null;
  status: IStatus | null = null;
  statusError: string | null = null;
  /** The status failed for want of any answer (Jupyter's server, not the memory service). */
  statusUnreachable = false;
  /** Why the last refresh failed, shown in the panel until one succeeds. */
  error: string | null = null;
  /** The last refresh failed for want of any answer from Jupyter's server. */
  errorUnreachable = false;
  loading = false;
  /** Set once the first listing arrived (the empty-state help waits for it). */
  loaded = false;
  /** What a slow request waits for, or null. */
  phase: Phase = null;
  snapshots: ISnapshot[] = [];
  diff: ISnapshotDiff | null = null;
  /** Why the last comparison was refused (shown in place of the diff). */
  diffError: string | null = null;
  diffNames: [string, string] | null = null;
  draft: IDraft | null = null;
  /**
   * Notes being edited, by id. Kept here, not in the cards, so that an edit survives the
   * refresh a write elsewhere brings (a new version, or the note moving to another page).
   */
  edits = new Map<number, IEdit>();
  /** The checks of the notes, by note id: fetched once with each listing or recall. */
  checks = new Map<number, ICheck>();
  /**
   * The store may be read but not written by this user (a team store member with
   * SELECT-only grants): the panel offers no write action. As the last running status
   * said it: a poll finding no owner running does not know, and changes nothing.
   */
  readOnly = false;
  /** The team store's `postgresql://` address (no password), or null for a local store. */
  teamStore: string | null = null;

  get changed(): ISignal<this, void> {
    return this._changed;
  }

  /** Emitted when the view, query or filters change (the plugin saves them). */
  get stateChanged(): ISignal<this, IPanelState> {
    return this._stateChanged;
  }

  /** Emitted after a note was written from this JupyterLab (panel, command, token). */
  get noteWritten(): ISignal<this, INote> {
    return this._noteWritten;
  }

  get state(): IPanelState {
    return { view: this.view, query: this.query, filters: { ...this.filters } };
  }

  /** Put back what the panel showed before a reload (before `start`). */
  restore(state: Partial<IPanelState> | null | undefined): void {
    if (!state) {
      return;
    }
    if (state.view === 'notes' || state.view === 'snapshots') {
      this.view = state.view;
    }
    if (typeof state.query === 'string') {
      this.query = state.query;
    }
    if (state.filters && typeof state.filters === 'object') {
      const f = state.filters as Partial<IFilters>;
      this.filters = {
        tags: typeof f.tags === 'string' ? f.tags : '',
        kind: typeof f.kind === 'string' ? f.kind : '',
        priority: typeof f.priority === 'string' ? f.priority : '',
        stale: f.stale === 'stale' || f.stale === 'fresh' ? f.stale : '',
        mine: f.mine === true,
        author: typeof f.author === 'string' ? f.author : ''
      };
    }
    this._emit();
  }

  /** Settings and saved state are in: requests may go out now. */
  start(): void {
    this._resolveReady();
  }

  /** Check that the server extension is there and speaks this panel's version (once). */
  checkVersion(): Promise<boolean> {
    if (!this._versionCheck) {
      this._versionCheck = this._checkVersion().then(ok => {
        if (!ok) {
          this._versionCheck = null; // try again on the next refresh
        }
        return ok;
      });
    }
    return this._versionCheck;
  }

  /**
   * Reload what the current view shows. A refresh of the same view already on its way is
   * shared, not sent again; `force` sends a new one (after a write). `status` reloads the
   * status line too (and starts the store's owner if none runs).
   */
  async refresh(options: { force?: boolean; status?: boolean } = {}): Promise<void> {
    await this._ready;
    if (!this.compatibility?.ok && !(await this.checkVersion())) {
      return;
    }
    const key = JSON.stringify([
      this.view,
      this.query.trim(),
      this.filters,
      this.offset,
      this.pageSize,
      this.recallSize,
      this.belowShown
    ]);
    const status = !!options.status || this.status === null;
    const inflight = this._inflight;
    if (!options.force && inflight?.key === key && (inflight.status || !status)) {
      return inflight.promise;
    }
    const ticket = ++this._ticket;
    const promise = this._load(ticket, status, key);
    this._inflight = { key, promise, status };
    try {
      await promise;
    } finally {
      if (this._inflight?.promise === promise) {
        this._inflight = null;
      }
    }
  }

  /**
   * The poll: the status alone, without starting an owner. Refetch the view when the
   * journal moved (a write elsewhere) or the stale set changed (a file changed on disk).
   */
  async poll(): Promise<void> {
    await this._ready;
    if (!this.compatibility?.ok) {
      await this.refresh();
      return;
    }
    const inflight = this._inflight;
    if (inflight) {
      // A refresh is on its way, but it may have left before the write that woke this
      // poll (two cells that remember one after the other): poll once more when it is
      // back, however many polls asked meanwhile.
      this._pollAgain ??= inflight.promise
        .catch(() => undefined)
        .then(() => {
          this._pollAgain = null;
          return this.poll();
        });
      return this._pollAgain;
    }
    const before = this.status;
    await this._loadStatus(false);
    const now = this.status;
    if (now && this.error) {
      // The server answers again: try what failed (the store may be free by now).
      await this.refresh({ force: true });
    } else if (
      this.hits !== null &&
      this.behind &&
      now?.model_loaded &&
      !now.model_loading &&
      this._shown !== null &&
      this._reasked !== this._shown
    ) {
      // Answered from the keywords while the model loaded: ask again with both channels,
      // once the model is in and warm (loaded is said a moment before it may be used),
      // and once per search (a team store's server away answers `behind` too).
      this._reasked = this._shown;
      await this.refresh({ force: true });
    } else if (
      now?.running &&
      (!before?.running ||
        now.journal_position !== before.journal_position ||
        now.stale_digest !== before.stale_digest)
    ) {
      await this.refresh({ force: true });
    } else {
      this._emit();
    }
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
    if (query === this.query) {
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
    if (query !== this.query) {
      this.setQuery(query);
    } else if (query.trim()) {
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

  // -- notices (JupyterLab's notifications) --------------------------------------------

  say(message: string, kind: 'info' | 'success' | 'error' = 'info'): void {
    if (kind === 'error') {
      this._errorToast(message, false);
    } else {
      Notification.emit(message, kind, { autoClose: INFO_MS });
    }
  }

  /**
   * Say why a request failed (an error notice). `kept`, said when the server could not be
   * reached, tells what the user still has ("Your edit is kept; save it once…").
   */
  fail(error: unknown, kept?: string): void {
    const message = this.wordsOf(error);
    this._errorToast(
      kept && isUnreachable(error) ? `${message} ${kept}` : message,
      error instanceof ApiError && error.transient
    );
  }

  /** An error in the user's words (no answer at all is not a "TypeError"). */
  wordsOf(error: unknown): string {
    return isUnreachable(error)
      ? this.trans.__("JupyterLab's server is not responding (stopped, or the network is down).")
      : messageOf(error);
  }

  /**
   * An error notice stays until closed, or until it no longer holds: one about a passing
   * condition (no server, the store held elsewhere) closes once a later request is
   * answered; any other once a later action succeeds.
   */
  private _errorToast(message: string, transient: boolean): void {
    const id = Notification.error(message, { autoClose: false });
    this._errorToasts.set(id, { transient, seq: ++this._toastSeq });
  }

  /** Close the error notices said before `seq` (all of them, or the passing ones only). */
  private _closeErrors(seq: number, transientOnly: boolean): void {
    for (const [id, toast] of [...this._errorToasts]) {
      if (toast.seq <= seq && (toast.transient || !transientOnly)) {
        this._errorToasts.delete(id);
        Notification.dismiss(id);
      }
    }
  }

  // -- the new-note form ----------------------------------------------------------------

  startDraft(draft: Partial<IDraft> = {}): void {
    if (this.readOnly) {
      this.say(this.readOnlyMessage);
      return;
    }
    this.draft = {
      text: draft.text ?? '',
      kind: draft.kind ?? 'finding',
      priority: draft.priority ?? 'medium',
      tags: draft.tags ?? '',
      provenance: draft.provenance,
      where: draft.where
    };
    this._draftStarted.emit();
    this._emit();
  }

  /** What the panel says, once, on a store this user may only read. */
  get readOnlyMessage(): string {
    return this.trans.__('Read-only team store: you can search and read notes.');
  }

  /** Emitted when a new draft is started (the form takes the focus). */
  get draftStarted(): ISignal<this, void> {
    return this._draftStarted;
  }

  cancelDraft(): void {
    this.draft = null;
    this._emit();
  }

  /** Remember the new note's form; the note, or null when it was not stored (said). */
  async saveDraft(draft: IDraft): Promise<INote | null> {
    try {
      const note = await this.remember(draft.text, {
        kind: draft.kind,
        priority: draft.priority,
        tags: tagList(draft.tags),
        provenance: draft.provenance
      });
      this.draft = null;
      this._closeErrors(this._toastSeq, false);
      this.say(this.trans.__('Remembered #%1.', note.id), 'success');
      return note;
    } catch (error) {
      this.fail(error, this.trans.__('Your note is kept in the form; save it once the server is back.'));
      this._emit();
      return null;
    }
  }

  // -- editing a note ------------------------------------------------------------------

  startEdit(note: INote): void {
    this.edits.set(note.id, {
      base: note,
      draft: {
        text: note.text,
        kind: note.kind,
        priority: note.priority,
        tags: note.tags.join(', ')
      }
    });
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
    edit.conflict = undefined;
    const { base } = edit;
    const fields: EditFields = {};
    if (draft.text !== base.text) {
      fields.text = draft.text;
    }
    if (draft.priority !== base.priority) {
      fields.priority = draft.priority;
    }
    if (draft.kind !== base.kind) {
      fields.kind = draft.kind;
    }
    const tags = tagList(draft.tags);
    if (tags.join(',') !== base.tags.join(',')) {
      fields.tags = tags;
    }
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
        this.fail(error, this.trans.__('Your edit is kept; save it once the server is back.'));
        this._emit();
        return false;
      }
      const clashing = Object.keys(fields).filter(
        name => fieldOf(now, name) !== fieldOf(edit.base, name)
      );
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
        this._closeErrors(this._toastSeq, false);
        this.say(this.trans.__('Saved #%1 as version %2.', note.id, note.version), 'success');
      } catch (error) {
        if (error instanceof ApiError && error.status === 409 && attempt < 2) {
          continue;
        }
        this.fail(error, this.trans.__('Your edit is kept; save it once the server is back.'));
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

  recallNotes(query: string, options: IRecallOptions = {}): Promise<IHits> {
    const params = [`query=${encodeURIComponent(query)}`];
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
      this.say(this.trans.__('Saved #%1 as version %2.', note.id, note.version), 'success');
    });
  }

  /** Forget (revoke) a note; the notice offers Undo for a while. */
  async forget(id: number): Promise<boolean> {
    return this._act(async () => {
      await this._request<INote>(`notes/${id}/forget`, json('POST'));
      this.forgotten = id;
      Notification.info(this.trans.__('Forgot #%1.', id), {
        autoClose: UNDO_MS,
        actions: [
          {
            label: this.trans.__('Undo'),
            caption: this.trans.__('Bring #%1 back', id),
            displayType: 'accent',
            callback: () => void this.undoForget(id)
          }
        ]
      });
    });
  }

  async undoForget(id: number): Promise<boolean> {
    return this._act(async () => {
      await this._request<INote>(`notes/${id}/reinstate`, json('POST'));
      if (this.forgotten === id) {
        this.forgotten = null;
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

  private async _checkVersion(): Promise<boolean> {
    try {
      const server = await requestAPI<IVersion>('version');
      if (server.version !== FRONTEND_VERSION) {
        this.compatibility = {
          ok: false,
          message: this.trans.__(
            'The nbmemory server extension is version %1 but this panel is %2. Install one nbmemory version into the Jupyter server\'s environment (pip install -U nbmemory), then restart JupyterLab and reload this page.',
            server.version,
            FRONTEND_VERSION
          )
        };
      } else {
        this.compatibility = { ok: true, message: '' };
        this._cold = server.owner_running === false;
      }
    } catch (error) {
      const status = error instanceof ApiError ? error.status : 0;
      this.compatibility = {
        ok: false,
        message:
          status === 404
            ? this.trans.__(
                "The nbmemory server extension is not running in this Jupyter server. Install nbmemory into the server's environment (pip install nbmemory), check it with `jupyter server extension list`, then restart JupyterLab."
              )
            : isUnreachable(error)
              ? this.wordsOf(error)
              : this.trans.__('Cannot reach the nbmemory server extension: %1', messageOf(error))
      };
    }
    this._emit();
    return this.compatibility.ok;
  }

  private async _load(ticket: number, status: boolean, key: string): Promise<void> {
    this.loading = true;
    this._emit();
    try {
      if (status) {
        await this._loadStatus(true);
      }
      if (this.view === 'snapshots') {
        const reply = await this._request<{ snapshots: ISnapshot[] }>('snapshots');
        if (ticket === this._ticket) {
          this.snapshots = reply.snapshots;
        }
      } else {
        // One request for the checks of every card, alongside the notes (never per card).
        await Promise.all([
          this.query.trim() ? this._recall(ticket) : this._list(ticket),
          this._loadChecks(ticket)
        ]);
      }
      if (ticket === this._ticket) {
        this.error = null;
        this.errorUnreachable = false;
        this.loaded = true;
        this._shown = key;
      }
    } catch (error) {
      if (ticket === this._ticket) {
        this.error = this.wordsOf(error);
        this.errorUnreachable = isUnreachable(error);
        if (this._shown !== key) {
          // Never show another query's or filter's results under this one.
          this._clearResults();
        }
      }
    } finally {
      if (ticket === this._ticket) {
        this.loading = false;
      }
      this._emit();
    }
  }

  private _clearResults(): void {
    this.notes = [];
    this.total = 0;
    this.hits = this.query.trim() ? [] : null;
    this.hitsQuery = this.query.trim();
    this.filteredOut = 0;
    this.previously = [];
    this.behind = null;
    this._shown = null;
  }

  private async _act(action: () => Promise<void>): Promise<boolean> {
    const seq = this._toastSeq;
    try {
      await action();
    } catch (error) {
      this.fail(error);
      this._emit();
      return false;
    }
    this._closeErrors(seq, false);
    await this.refresh({ force: true, status: true });
    return true;
  }

  /** `start`: whether the status may start the store's owner (the poll's may not). */
  private async _loadStatus(start: boolean): Promise<void> {
    try {
      const status = await this._request<IStatus>(start ? 'status' : 'status?start=false');
      this.status = status;
      this.statusError = null;
      this.statusUnreachable = false;
      if (status.running) {
        this.readOnly = status.read_only === true;
        this.teamStore = isTeamStore(status.store) ? status.store : null;
        if (this.readOnly && this.draft) {
          this.draft = null; // a form that cannot be saved
        }
      }
    } catch (error) {
      this.status = null;
      this.statusError = this.wordsOf(error);
      this.statusUnreachable = isUnreachable(error);
    }
  }

  /** The checks (a failure leaves the last ones: the cards still show the notes). */
  private async _loadChecks(ticket: number): Promise<void> {
    try {
      const reply = await this._request<{ checks: ICheck[] }>('checks');
      if (ticket === this._ticket) {
        this.checks = new Map(reply.checks.map(check => [check.note_id, check]));
      }
    } catch (error) {
      console.warn('nbmemory: cannot load the checks', error);
    }
  }

  private _filterParams(): string[] {
    const params: string[] = [];
    const { kind, priority } = this.filters;
    const tags = tagList(this.filters.tags).join(',');
    if (tags) {
      params.push(`tags=${encodeURIComponent(tags)}`);
    }
    if (kind) {
      params.push(`kind=${encodeURIComponent(kind)}`);
    }
    if (priority) {
      params.push(`priority=${encodeURIComponent(priority)}`);
    }
    if (this.filters.mine) {
      params.push('mine=true');
    } else if (this.filters.author) {
      params.push(`author=${encodeURIComponent(this.filters.author)}`);
    }
    return params;
  }

  private async _list(ticket: number): Promise<void> {
    const params = this._filterParams();
    if (this.filters.stale) {
      params.push(`stale=${this.filters.stale}`);
    }
    params.push(`offset=${this.offset}`, `limit=${this.pageSize}`);
    const page = await this._request<IPage>(`notes?${params.join('&')}`);
    if (ticket === this._ticket) {
      this.notes = page.notes;
      this.total = page.total;
      this.hits = null;
      this.filteredOut = 0;
      this.previously = [];
      this.behind = page.behind ?? null;
    }
  }

  private async _recall(ticket: number): Promise<void> {
    const params = this._filterParams();
    if (this.filters.stale) {
      params.push(`stale=${this.filters.stale}`);
    }
    if (this.belowShown) {
      params.push('min_score=-1');
    }
    params.push(`query=${encodeURIComponent(this.query.trim())}`, `k=${this.recallSize}`);
    const result = await this._request<IHits>(`recall?${params.join('&')}`, {}, 'recall');
    if (ticket === this._ticket) {
      this.hits = result.hits;
      this.hitsQuery = result.query;
      this.filteredOut = result.filtered_out;
      this.previously = result.previously;
      this.behind = result.behind ?? null;
      this.notes = [];
      this.total = this.hits.length;
    }
  }

  /**
   * One request to the server. While it is slow the panel says why: a cold store (no
   * owner yet) is "starting"; an operation needing the model before it is loaded is
   * "loading the model"; past `SLOW_MS` the server is asked (`GET owner`).
   */
  private async _request<T>(endPoint: string, init: RequestInit = {}, operation = ''): Promise<T> {
    let phase: Phase = null;
    if (this._cold) {
      phase = 'starting';
    } else if (EMBEDS.has(operation) && this.status?.model_loaded === false) {
      phase = 'loading-model';
    }
    const token = {};
    this._pending.set(token, phase);
    this._updatePhase();
    const timer = window.setTimeout(() => void this._watchSlow(token), SLOW_MS);
    const seq = this._toastSeq;
    try {
      const result = await requestAPI<T>(endPoint, init);
      this._cold = false;
      // Answered: what an earlier error notice said of the server or the store is over.
      this._closeErrors(seq, true);
      // Answered by meaning: the model is in. A keyword-only answer (`behind`) says it
      // is not yet, and the poll asks again once it is.
      const behind = (result as { behind?: string | null } | null)?.behind;
      if (EMBEDS.has(operation) && this.status && !behind) {
        this.status = { ...this.status, model_loaded: true };
      }
      return result;
    } finally {
      window.clearTimeout(timer);
      this._pending.delete(token);
      this._updatePhase();
    }
  }

  /** Ask the server what a slow request waits for, until it is answered. */
  private async _watchSlow(token: object): Promise<void> {
    while (this._pending.has(token)) {
      let state: IOwnerState | null = null;
      try {
        state = await requestAPI<IOwnerState>('owner');
      } catch {
        state = null;
      }
      if (!this._pending.has(token)) {
        return;
      }
      this._pending.set(token, state ? phaseOf(state) : 'working');
      this._updatePhase();
      await new Promise(resolve => window.setTimeout(resolve, OWNER_POLL_MS));
    }
  }

  private _updatePhase(): void {
    const order: Phase[] = ['starting', 'loading-model', 'working'];
    const phases = [...this._pending.values()];
    const phase = order.find(p => phases.includes(p)) ?? null;
    if (phase !== this.phase) {
      this.phase = phase;
      this._emit();
    }
  }

  private _emit(): void {
    this._changed.emit();
  }

  private _ticket = 0;
  /** The panel's own error notices still shown, by notification id. */
  private _errorToasts = new Map<string, { transient: boolean; seq: number }>();
  private _toastSeq = 0;
  /** The recall (refresh key) asked again once the model was seen loaded. */
  private _reasked: string | null = null;
  /** The refresh key of what the views show now. */
  private _shown: string | null = null;
  private _inflight: { key: string; promise: Promise<void>; status: boolean } | null = null;
  private _pollAgain: Promise<void> | null = null;
  private _versionCheck: Promise<boolean> | null = null;
  /** No owner ran at the handshake: the next request starts one. */
  private _cold = false;
  private _pending = new Map<object, Phase>();
  private _ready: Promise<void>;
  private _resolveReady: () => void = () => undefined;
  private _changed = new Signal<this, void>(this);
  private _stateChanged = new Signal<this, IPanelState>(this);
  private _noteWritten = new Signal<this, INote>(this);
  private _draftStarted = new Signal<this, void>(this);
}

/** What a slow request waits for, from the server's `owner` answer. */
export function phaseOf(state: IOwnerState): Phase {
  if (state.opening || !state.running || state.state === 'starting') {
    return 'starting';
  }
  if (state.busy && EMBEDS.has(state.busy) && !state.model_loaded) {
    return 'loading-model';
  }
  return 'working';
}

/** No answer at all from Jupyter's server (stopped, or the network is down). */
export function isUnreachable(error: unknown): boolean {
  return error instanceof ApiError && error.unreachable;
}

export function messageOf(error: unknown): string {
  if (error instanceof Error) {
    return error.message;
  }
  return String(error);
}

export function describeStale(
  reason: { reason: string; target: string; detail: string },
  trans?: TranslationBundle
): string {
  const t = trans ?? nullTranslator.load('nbmemory');
  const names: Record<string, string> = {
    missing: t.__('missing'),
    content_changed: t.__('content changed'),
    schema_changed: t.__('schema changed'),
    rows_changed: t.__('rows changed'),
    cell_changed: t.__('cell changed'),
    superseded: t.__('superseded'),
    check_failed: t.__('check failed'),
    check_error: t.__('could not be checked'),
    unchecked: t.__('cannot check')
  };
  const name = names[reason.reason] ?? reason.reason.replace(/_/g, ' ');
  const text = `${name} ${reason.target}`.trim();
  return reason.detail ? `${text} (${reason.detail})` : text;
}

/** "3 min", "2 d", like the magics' age column. */
export function age(when: string | null, trans?: TranslationBundle, now: number = Date.now()): string {
  if (!when) {
    return '';
  }
  const t = trans ?? nullTranslator.load('nbmemory');
  const seconds = Math.max(0, (now - new Date(when).getTime()) / 1000);
  const steps: [number, (n: number) => string, number][] = [
    [60, n => t.__('%1 s', n), 1],
    [3600, n => t.__('%1 min', n), 60],
    [86400, n => t.__('%1 h', n), 3600],
    [86400 * 14, n => t.__('%1 d', n), 86400],
    [86400 * 60, n => t.__('%1 wk', n), 86400 * 7],
    [86400 * 730, n => t.__('%1 mo', n), 86400 * 30]
  ];
  for (const [limit, unit, size] of steps) {
    if (seconds < limit) {
      return unit(Math.floor(seconds / size));
    }
  }
  return t.__('%1 y', Math.floor(seconds / (86400 * 365)));
}
