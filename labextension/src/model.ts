import { ISignal, Signal } from '@lumino/signaling';

import { ApiError, json, requestAPI } from './request';
import {
  IFilters,
  IHit,
  IHits,
  INote,
  INoteDetail,
  IPage,
  ISnapshot,
  ISnapshotDiff,
  IStatus,
  IVersion
} from './types';

// The version of this frontend, compared with the server extension's.
import packageInfo from '../package.json';

export const FRONTEND_VERSION: string = packageInfo.version;

export type View = 'notes' | 'snapshots';

export interface INotice {
  kind: 'info' | 'error' | 'undo';
  message: string;
  /** For `undo` notices: the note that was forgotten. */
  noteId?: number;
}

/**
 * The panel's state and every call it makes to the server.
 *
 * Views read the public fields and re-render on `changed`; they never call the API.
 */
export class MemoryModel {
  /** Compatibility of the server extension: null until checked. */
  compatibility: { ok: boolean; message: string } | null = null;
  view: View = 'notes';
  query = '';
  filters: IFilters = { tags: '', kind: '', priority: '', stale: '' };
  pageSize = 25;
  offset = 0;
  notes: INote[] = [];
  total = 0;
  /** Recall results when a query is set, else null. */
  hits: IHit[] | null = null;
  filteredOut = 0;
  previously: IHit[] = [];
  status: IStatus | null = null;
  statusError: string | null = null;
  notice: INotice | null = null;
  loading = false;
  snapshots: ISnapshot[] = [];
  diff: ISnapshotDiff | null = null;
  diffNames: [string, string] | null = null;

  get changed(): ISignal<this, void> {
    return this._changed;
  }

  /** Check that the server extension is there and speaks this panel's version. */
  async checkVersion(): Promise<boolean> {
    try {
      const server = await requestAPI<IVersion>('version');
      if (server.version !== FRONTEND_VERSION) {
        this.compatibility = {
          ok: false,
          message:
            `The nbmemory server extension is version ${server.version} but this panel is ` +
            `${FRONTEND_VERSION}. Install one nbmemory version into the Jupyter server's ` +
            'environment (pip install -U nbmemory), then restart JupyterLab and reload this page.'
        };
      } else {
        this.compatibility = { ok: true, message: '' };
      }
    } catch (error) {
      const status = error instanceof ApiError ? error.status : 0;
      this.compatibility = {
        ok: false,
        message:
          status === 404
            ? 'The nbmemory server extension is not running in this Jupyter server. Install ' +
              "nbmemory into the server's environment (pip install nbmemory), check it with " +
              '`jupyter server extension list`, then restart JupyterLab.'
            : `Cannot reach the nbmemory server extension: ${messageOf(error)}`
      };
    }
    this._emit();
    return this.compatibility.ok;
  }

  /** Reload what the current view shows (notes or recall hits, status, snapshots). */
  async refresh(): Promise<void> {
    if (!this.compatibility?.ok && !(await this.checkVersion())) {
      return;
    }
    const ticket = ++this._ticket;
    this.loading = true;
    this._emit();
    try {
      await this._loadStatus();
      if (this.view === 'snapshots') {
        await this._loadSnapshots();
      } else if (this.query.trim()) {
        await this._recall(ticket);
      } else {
        await this._list(ticket);
      }
    } catch (error) {
      if (ticket === this._ticket) {
        this.notice = { kind: 'error', message: messageOf(error) };
      }
    } finally {
      if (ticket === this._ticket) {
        this.loading = false;
      }
      this._emit();
    }
  }

  /** Cheap check for writes made elsewhere: refresh when the journal moved. */
  async poll(): Promise<void> {
    if (!this.compatibility?.ok) {
      await this.refresh();
      return;
    }
    const before = this.status?.journal_position;
    await this._loadStatus();
    if (this.status && this.status.journal_position !== before) {
      await this.refresh();
    } else {
      this._emit();
    }
  }

  setView(view: View): void {
    this.view = view;
    void this.refresh();
  }

  setQuery(query: string): void {
    this.query = query;
    this.offset = 0;
    void this.refresh();
  }

  setFilters(filters: Partial<IFilters>): void {
    this.filters = { ...this.filters, ...filters };
    this.offset = 0;
    void this.refresh();
  }

  setPage(offset: number): void {
    this.offset = Math.max(0, offset);
    void this.refresh();
  }

  setPageSize(size: number): void {
    this.pageSize = size;
    void this.refresh();
  }

  dismissNotice(): void {
    this.notice = null;
    this._emit();
  }

  say(message: string, kind: 'info' | 'error' = 'info'): void {
    this.notice = { kind, message };
    this._emit();
  }

  async detail(id: number): Promise<INoteDetail> {
    return requestAPI<INoteDetail>(`notes/${id}`);
  }

  /** Write a new version of a note. */
  async edit(
    id: number,
    fields: { text?: string; priority?: string; kind?: string; tags?: string[] }
  ): Promise<boolean> {
    return this._act(async () => {
      const note = await requestAPI<INote>(`notes/${id}`, json('PATCH', fields));
      this.notice = { kind: 'info', message: `Saved #${note.id} as version ${note.version}.` };
    });
  }

  /** Forget (revoke) a note; the notice offers an undo. */
  async forget(id: number): Promise<boolean> {
    return this._act(async () => {
      await requestAPI<INote>(`notes/${id}/forget`, json('POST'));
      this.notice = { kind: 'undo', message: `Forgot #${id}.`, noteId: id };
    });
  }

  async undoForget(id: number): Promise<boolean> {
    return this._act(async () => {
      await requestAPI<INote>(`notes/${id}/reinstate`, json('POST'));
      this.notice = { kind: 'info', message: `Reinstated #${id}.` };
    });
  }

  async verify(id: number): Promise<boolean> {
    return this._act(async () => {
      const result = await requestAPI<any>(`notes/${id}/verify`, json('POST'));
      const note: INote | undefined = result?.note ?? (result?.id ? result : undefined);
      const stale = note && note.stale && note.stale.length;
      this.notice = {
        kind: 'info',
        message: stale
          ? `#${id} is still stale: ${note!.stale.map(describeStale).join('; ')}`
          : `Verified #${id}: its anchors were re-checked.`
      };
    });
  }

  async diffSnapshots(from: string, to: string): Promise<void> {
    this.diffNames = [from, to];
    try {
      const query = `from=${encodeURIComponent(from)}` + (to ? `&to=${encodeURIComponent(to)}` : '');
      this.diff = await requestAPI<ISnapshotDiff>(`snapshots/diff?${query}`);
    } catch (error) {
      this.diff = null;
      this.notice = { kind: 'error', message: messageOf(error) };
    }
    this._emit();
  }

  private async _act(action: () => Promise<void>): Promise<boolean> {
    try {
      await action();
      await this.refresh();
      return true;
    } catch (error) {
      this.notice = { kind: 'error', message: messageOf(error) };
      this._emit();
      return false;
    }
  }

  private async _loadStatus(): Promise<void> {
    try {
      this.status = await requestAPI<IStatus>('status');
      this.statusError = null;
    } catch (error) {
      this.status = null;
      this.statusError = messageOf(error);
    }
  }

  private _filterParams(): string[] {
    const params: string[] = [];
    const { tags, kind, priority } = this.filters;
    if (tags.trim()) {
      params.push(`tags=${encodeURIComponent(tags.trim())}`);
    }
    if (kind) {
      params.push(`kind=${encodeURIComponent(kind)}`);
    }
    if (priority) {
      params.push(`priority=${encodeURIComponent(priority)}`);
    }
    return params;
  }

  private async _list(ticket: number): Promise<void> {
    const params = this._filterParams();
    if (this.filters.stale) {
      params.push(`stale=${this.filters.stale}`);
    }
    params.push(`offset=${this.offset}`, `limit=${this.pageSize}`);
    const page = await requestAPI<IPage>(`notes?${params.join('&')}`);
    if (ticket === this._ticket) {
      this.notes = page.notes;
      this.total = page.total;
      this.hits = null;
      this.filteredOut = 0;
      this.previously = [];
    }
  }

  private async _recall(ticket: number): Promise<void> {
    const params = this._filterParams();
    params.push(`query=${encodeURIComponent(this.query.trim())}`, `k=${this.pageSize}`);
    const result = await requestAPI<IHits>(`recall?${params.join('&')}`);
    if (ticket === this._ticket) {
      const stale = this.filters.stale;
      this.hits = result.hits.filter(
        hit => !stale || (hit.note.stale.length > 0) === (stale === 'stale')
      );
      this.filteredOut = result.filtered_out;
      this.previously = result.previously;
      this.notes = [];
      this.total = this.hits.length;
    }
  }

  private async _loadSnapshots(): Promise<void> {
    const reply = await requestAPI<{ snapshots: ISnapshot[] }>('snapshots');
    this.snapshots = reply.snapshots;
  }

  private _emit(): void {
    this._changed.emit();
  }

  private _ticket = 0;
  private _changed = new Signal<this, void>(this);
}

export function messageOf(error: unknown): string {
  if (error instanceof Error) {
    return error.message;
  }
  return String(error);
}

export function describeStale(reason: { reason: string; target: string; detail: string }): string {
  const text = `${reason.reason.replace(/_/g, ' ')} ${reason.target}`.trim();
  return reason.detail ? `${text} (${reason.detail})` : text;
}

/** "3 min", "2 d", like the magics' age column. */
export function age(when: string | null, now: number = Date.now()): string {
  if (!when) {
    return '';
  }
  const seconds = Math.max(0, (now - new Date(when).getTime()) / 1000);
  const steps: [number, string, number][] = [
    [60, 's', 1],
    [3600, 'min', 60],
    [86400, 'h', 3600],
    [86400 * 14, 'd', 86400],
    [86400 * 60, 'wk', 86400 * 7],
    [86400 * 730, 'mo', 86400 * 30]
  ];
  for (const [limit, unit, size] of steps) {
    if (seconds < limit) {
      return `${Math.floor(seconds / size)} ${unit}`;
    }
  }
  return `${Math.floor(seconds / (86400 * 365))} y`;
}
