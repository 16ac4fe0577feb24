import { Token } from '@lumino/coreutils';
import { ISignal } from '@lumino/signaling';

import { IHits, INote, IPage, Order } from './types';

/** Where a note written through the panel or another extension comes from. */
export interface INoteSource {
  /** The notebook, as JupyterLab names it (relative to the server root). */
  notebook?: string;
  cell_id?: string;
  execution_count?: number;
  /** The source of the code cell, so that the note goes stale when the cell changes. */
  cell_source?: string;
}

export interface IRememberOptions {
  kind?: string;
  priority?: string;
  /** A list, or a comma-separated string. */
  tags?: string[] | string;
  provenance?: INoteSource;
}

export interface IRecallOptions {
  k?: number;
  tags?: string;
  kind?: string;
  priority?: string;
  min_score?: number;
  /** Only notes written by these authors (comma-separated). */
  author?: string;
  /** Only notes written by the Jupyter user making the request. */
  mine?: boolean;
}

export interface INotesOptions {
  offset?: number;
  limit?: number;
  tags?: string;
  kind?: string;
  priority?: string;
  stale?: 'stale' | 'fresh';
  /** Only notes written by these authors (comma-separated). */
  author?: string;
  /** Only notes written by the Jupyter user making the request. */
  mine?: boolean;
  /** Newest (the default: last written or edited first), oldest or priority first. */
  order?: Order;
}

/**
 * nbmemory for other JupyterLab extensions: recall and remember through the Jupyter
 * server (same authentication, same store, same author as the panel).
 *
 * ```ts
 * const plugin = { id: 'my:plugin', requires: [INbMemory], activate: (app, memory) => {
 *   void memory.recall('which unit is orders.amount in').then(hits => ...);
 * }};
 * ```
 */
export interface INbMemory {
  /** Hybrid (keyword + meaning) recall of the best active notes. */
  recall(query: string, options?: IRecallOptions): Promise<IHits>;
  /** Store a finding; the panel shows it at once. */
  remember(text: string, options?: IRememberOptions): Promise<INote>;
  /** A page of notes, newest first unless `order` says. */
  notes(options?: INotesOptions): Promise<IPage>;
  /** Open the panel with a new note started (text and source filled in). */
  draft(text: string, options?: IRememberOptions): void;
  /** Emitted after a note was written through the panel or this service. */
  readonly changed: ISignal<INbMemory, void>;
}

export const INbMemory = new Token<INbMemory>(
  'nbmemory:INbMemory',
  'Recall and remember with nbmemory from other extensions.'
);
