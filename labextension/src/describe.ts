/**
 * Errors, stale reasons, what a note is about and ages in the panel's words (pure
 * functions of what the server said).
 */

import { nullTranslator, TranslationBundle } from '@jupyterlab/translation';

import { ApiError } from './request';
import { IAnchor } from './types';

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

/** An error in the user's words (no answer at all is not a "TypeError"). */
export function wordsOf(error: unknown, trans: TranslationBundle): string {
  return isUnreachable(error)
    ? trans.__("JupyterLab's server is not responding (stopped, or the network is down).")
    : messageOf(error);
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

/**
 * An anchor as the magics' "About:" line names it (`wording.anchor_label`), without what
 * its fingerprint holds (columns, rows, a variable's type): a card's line stays short.
 */
export function anchorLabel(anchor: IAnchor, trans?: TranslationBundle): string {
  const t = trans ?? nullTranslator.load('nbmemory');
  switch (anchor.kind) {
    case 'check':
      return t.__('check %1', anchor.target);
    case 'evidence':
      return t.__('evidence %1', anchor.target);
    case 'dir':
      return anchor.target.replace(/\/+$/, '') + '/';
    default:
      return anchor.target;
  }
}

/**
 * What a card's "About:" line lists: every anchor but its cell (provenance, shown below
 * the note) and those `skip` leaves out, the first `cap` of them and how many more.
 */
export function aboutList(
  anchors: IAnchor[] | undefined,
  trans?: TranslationBundle,
  skip: (anchor: IAnchor) => boolean = () => false,
  cap = 3
): { shown: string[]; more: number; all: string[] } {
  const all = (anchors ?? [])
    .filter(a => a.kind !== 'cell' && !skip(a))
    .map(a => anchorLabel(a, trans));
  // Never "+1 more": the one item takes no more room than those words.
  const shown = all.length > cap + 1 ? all.slice(0, cap) : all;
  return { shown, more: all.length - shown.length, all };
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
