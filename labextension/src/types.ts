/**
 * The JSON shapes of nbmemory's REST API (docs/rest-api.md).
 */

export interface IProvenance {
  notebook?: string;
  cell_id?: string;
  execution_count?: number;
  source?: string;
  git_commit?: string;
  git_branch?: string;
  git_dirty?: boolean;
  [key: string]: unknown;
}

export interface IStaleReason {
  reason: string;
  target: string;
  detail: string;
}

/** One thing a note is about, as `wording.anchor_label` names it in the magics. */
export interface IAnchor {
  /** file, dir, glob, data, variable, cell, check, evidence... */
  kind: string;
  target: string;
  fingerprint?: Record<string, unknown>;
  /** about (named), text (a path the text mentions), check... */
  origin?: string;
}

export interface INote {
  id: number;
  text: string;
  kind: string;
  priority: string;
  tags: string[];
  status: string;
  version: number;
  created_at: string | null;
  updated_at: string | null;
  author: string | null;
  provenance: IProvenance;
  stale: IStaleReason[];
  /** What it is about (files, data, variables, its cell, a check). */
  anchors?: IAnchor[];
  /** The notebook's path relative to the server root, when the server can tell. */
  lab_path?: string | null;
}

export interface IHit {
  note: INote;
  score: number;
  lexical: number | null;
  dense: number | null;
}

export interface IHits {
  query: string;
  hits: IHit[];
  filtered_out: number;
  previously: IHit[];
  /** Set when a team store's server was unreachable: the answer came from a local copy. */
  behind?: string | null;
}

export interface IPage {
  notes: INote[];
  total: number;
  offset: number;
  limit: number;
  /** Set when a team store's server was unreachable: the page came from a local copy. */
  behind?: string | null;
}

export interface IEvent {
  seq: number;
  at: string;
  note_id: number | null;
  type: string;
  actor: string | null;
  data: Record<string, unknown>;
}

export interface INoteDetail {
  note: INote;
  history: IEvent[];
  /** Every version, oldest first (`updated_at`: when it was written). */
  versions: INote[];
}

export interface ISnapshot {
  name: string;
  seq: number;
  at: string;
  message: string;
  author: string | null;
  note_count: number;
}

export interface ISnapshotDiff {
  a: string;
  b: string;
  a_seq: number;
  b_seq: number;
  /** `reasons`: a note that became stale, why (its new reasons, as data). */
  changes: { change: string; note: INote; detail: string; reasons?: IStaleReason[] }[];
}

export interface IStatus {
  store: string;
  store_reason?: string;
  /** False when no owner serves the store (the poll starts none): nothing else is set. */
  running: boolean;
  notes?: number;
  model?: string;
  model_loaded?: boolean;
  /** The owner is loading the model: recall answers from keywords meanwhile. */
  model_loading?: boolean;
  /** The vector index's state, e.g. `building 45,000/100,000 (recall searches exactly meanwhile)`. */
  index?: string;
  owner?: string;
  pid?: number;
  owner_pid?: number;
  journal_position?: number;
  /** How many active notes are stale, and a digest of which and why. */
  stale?: number;
  stale_digest?: string;
  /** A team store member whose PostgreSQL grants allow reading only. */
  read_only?: boolean;
  version?: string;
  [key: string]: unknown;
}

/** `GET owner`: who serves the store and what the server waits for (never queued). */
export interface IOwnerState {
  running: boolean;
  mode: string | null;
  state: string | null;
  pid: number | null;
  uptime_s: number | null;
  model: string | null;
  model_loaded: boolean | null;
  opening: boolean;
  busy: string | null;
  busy_s: number | null;
}

export interface IVersion {
  version: string;
  api: number;
  /** Whether an owner serves the store now: if not, the first request starts one. */
  owner_running?: boolean;
}

/** `GET notes/{id}/source`: is the note's notebook still there, and where did its cell go. */
export interface ISource {
  lab_path: string | null;
  exists: boolean;
  moved_to: string[];
}

export interface IFilters {
  tags: string;
  kind: string;
  priority: string;
  stale: '' | 'stale' | 'fresh';
  /** Only the notes written by the Jupyter user of the panel (`mine=true`). */
  mine: boolean;
  /** Only the notes written by this member (`author=NAME`); '' for everyone's. */
  author: string;
  /** How the list is sorted (not recall: it ranks by score). */
  order: Order;
}

/**
 * The list's sort orders (`GET notes?order=`): `newest` by the last write (an edit moves
 * a note up), `oldest` by when it was first written, `priority` high to low, then by
 * when first written, newest first.
 */
export type Order = 'newest' | 'oldest' | 'priority';
export const ORDERS: Order[] = ['newest', 'oldest', 'priority'];

export const KINDS = [
  'finding',
  'gotcha',
  'decision',
  'question',
  'reference',
  'procedure'
];
export const PRIORITIES = ['high', 'medium', 'low'];

/** The latest outcome of a check, as the kernel that ran it journalled it. */
export interface ICheckOutcome {
  status: 'passed' | 'failed' | 'error' | 'skipped' | string;
  at: string | null;
  by?: string | null;
  /** repr of the value (capped), for passed and failed. */
  value?: string;
  /** The exception line, for an error. */
  error?: string;
  /** Why it did not run, for skipped. */
  why?: string;
}

/** `GET checks`: a note's check. The server never evaluates one; a kernel does. */
export interface ICheck {
  note_id: number;
  expression: string;
  names: string[];
  /** repr of the value when the note was written. */
  value: string | null;
  /** Whether this Jupyter user's kernels run it (someone else's check waits for trust). */
  trusted: boolean;
  last: ICheckOutcome | null;
  written_at: string | null;
}
