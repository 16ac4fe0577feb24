/**
 * The panel's state, and how it is read from the server: the handshake, refreshes (shared
 * while in flight), the poll, and each request with its phase and error notices.
 */

import { nullTranslator, TranslationBundle } from '@jupyterlab/translation';
import { ISignal, Signal } from '@lumino/signaling';

import { isTeamStore } from './address';
import { isUnreachable, wordsOf } from './describe';
import { IDraft, IEdit } from './drafts';
import { EMPTY_FILTERS, filterParams, orderParams, restoredFilters } from './filters';
import { Notices } from './notices';
import { EMBEDS, Phase, PhaseWatch } from './phase';
import { ApiError, requestAPI } from './request';
import {
  ICheck,
  IFilters,
  IHit,
  IHits,
  INote,
  IPage,
  ISnapshot,
  ISnapshotDiff,
  IStatus
} from './types';
import { checkServer } from './version';

export type View = 'notes' | 'snapshots';

/**
 * The longest recall query, in characters, as the server takes it: the query travels in
 * the URL, and a URL over 64 KB gets no answer at all from Jupyter's server.
 */
export const MAX_QUERY = 4000;

/** What the panel keeps across reloads (IStateDB). */
export interface IPanelState {
  view: View;
  query: string;
  filters: IFilters;
}

/**
 * What the panel shows, and how it is loaded; `MemoryModel` adds what changes it.
 *
 * Views read the public fields and re-render on `changed`; they never call the API.
 * Each request is sent once: identical refreshes in flight are shared, and the poll asks
 * for the status only (without starting the store's owner).
 */
export class MemoryState {
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
  /** Why the new-note form's last save was not written (the form says it too: with the
   * server away, JupyterLab may not be able to load its notifications). */
  draftFailure: string | null = null;
  /** The new-note form as it was started (empty, or from a cell): typing is what differs. */
  draftStart: IDraft | null = null;
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
      this.filters = restoredFilters(state.filters as Partial<IFilters>);
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

  // -- notices (JupyterLab's notifications) --------------------------------------------

  say(message: string, kind: 'info' | 'success' | 'error' = 'info'): void {
    this._notices.say(message, kind);
  }

  /**
   * Say why a request failed (an error notice), and return it. `kept`, said when the server
   * could not be reached, tells what the user still has ("Your edit is kept; save it once…").
   */
  fail(error: unknown, kept?: string): string {
    const message = this.wordsOf(error);
    const said = kept && isUnreachable(error) ? `${message} ${kept}` : message;
    this._notices.error(said, error instanceof ApiError && error.transient);
    return said;
  }

  /** An error in the user's words (no answer at all is not a "TypeError"). */
  wordsOf(error: unknown): string {
    return wordsOf(error, this.trans);
  }

  /** What the panel says, once, on a store this user may only read. */
  get readOnlyMessage(): string {
    return this.trans.__('Read-only team store: you can search and read notes.');
  }

  // -- internals ------------------------------------------------------------------------

  private async _checkVersion(): Promise<boolean> {
    const { compatibility, cold } = await checkServer(this.trans);
    this.compatibility = compatibility;
    if (compatibility.ok) {
      this._cold = cold;
    }
    this._emit();
    return compatibility.ok;
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

  private async _list(ticket: number): Promise<void> {
    const params = filterParams(this.filters);
    if (this.filters.stale) {
      params.push(`stale=${this.filters.stale}`);
    }
    params.push(...orderParams(this.filters)); // on every page: paging keeps the order
    const at = (offset: number) =>
      `notes?${[...params, `offset=${offset}`, `limit=${this.pageSize}`].join('&')}`;
    let page = await this._request<IPage>(at(this.offset));
    if (!page.notes.length && this.offset > 0 && page.total > 0 && ticket === this._ticket) {
      // A forget (here or elsewhere) emptied the last page: show the page before it.
      this.offset = Math.floor((page.total - 1) / this.pageSize) * this.pageSize;
      page = await this._request<IPage>(at(this.offset));
    }
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
    const params = filterParams(this.filters);
    if (this.filters.stale) {
      params.push(`stale=${this.filters.stale}`);
    }
    if (this.belowShown) {
      params.push('min_score=-1');
    }
    params.push(this._queryParam(this.query.trim()), `k=${this.recallSize}`);
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
   * A recall's `query=` parameter, or a refusal of a query longer than the server takes,
   * which is never sent: the panel says so rather than "the server is not responding".
   */
  protected _queryParam(query: string): string {
    const length = [...query].length;
    if (length > MAX_QUERY) {
      const message = this.trans.__(
        'The search text has %1 characters; recall takes at most %2. Shorten it.',
        length.toLocaleString(),
        MAX_QUERY.toLocaleString()
      );
      throw new ApiError(message, 400, 'InvalidInput');
    }
    return `query=${encodeURIComponent(query)}`;
  }

  /**
   * One request to the server. While it is slow the panel says why: a cold store (no
   * owner yet) is "starting"; an operation needing the model before it is loaded is
   * "loading the model"; once it is slow the server is asked (`GET owner`, PhaseWatch).
   */
  protected async _request<T>(
    endPoint: string,
    init: RequestInit = {},
    operation = ''
  ): Promise<T> {
    let phase: Phase = null;
    if (this._cold) {
      phase = 'starting';
    } else if (EMBEDS.has(operation) && this.status?.model_loaded === false) {
      phase = 'loading-model';
    }
    const token = this._phases.begin(phase);
    const seq = this._notices.seq;
    try {
      const result = await requestAPI<T>(endPoint, init);
      this._cold = false;
      // Answered: what an earlier error notice said of the server or the store is over.
      this._notices.close(seq, true);
      // Answered by meaning: the model is in. A keyword-only answer (`behind`) says it
      // is not yet, and the poll asks again once it is.
      const behind = (result as { behind?: string | null } | null)?.behind;
      if (EMBEDS.has(operation) && this.status && !behind) {
        this.status = { ...this.status, model_loaded: true };
      }
      return result;
    } finally {
      this._phases.end(token);
    }
  }

  protected _emit(): void {
    this._changed.emit();
  }

  protected _notices = new Notices();
  private _phases = new PhaseWatch(phase => {
    this.phase = phase;
    this._emit();
  });
  private _ticket = 0;
  /** The recall (refresh key) asked again once the model was seen loaded. */
  private _reasked: string | null = null;
  /** The refresh key of what the views show now. */
  private _shown: string | null = null;
  private _inflight: { key: string; promise: Promise<void>; status: boolean } | null = null;
  private _pollAgain: Promise<void> | null = null;
  private _versionCheck: Promise<boolean> | null = null;
  /** No owner ran at the handshake: the next request starts one. */
  private _cold = false;
  private _ready: Promise<void>;
  private _resolveReady: () => void = () => undefined;
  private _changed = new Signal<this, void>(this);
}
