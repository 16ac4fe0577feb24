/**
 * The panel's words for the store's values: a note's kind, priority and status, the list's
 * orders, and a snapshot diff's kinds of change.
 */

import { TranslationBundle } from '@jupyterlab/translation';

export function kindLabel(kind: string, trans: TranslationBundle): string {
  const labels: Record<string, string> = {
    finding: trans.__('finding'),
    gotcha: trans.__('gotcha'),
    decision: trans.__('decision'),
    question: trans.__('question'),
    reference: trans.__('reference'),
    procedure: trans.__('procedure')
  };
  return labels[kind] ?? kind;
}

/** A note's status in the panel's words (the panel says "forget", the store "revoked"). */
export function statusLabel(status: string, trans: TranslationBundle): string {
  const labels: Record<string, string> = {
    revoked: trans.__('forgotten'),
    refuted: trans.__('refuted'),
    superseded: trans.__('superseded'),
    purged: trans.__('erased')
  };
  return labels[status] ?? status;
}

export function priorityLabel(priority: string, trans: TranslationBundle): string {
  const labels: Record<string, string> = {
    high: trans.__('high'),
    medium: trans.__('medium'),
    low: trans.__('low')
  };
  return labels[priority] ?? priority;
}

/** An order of the list as the sort select names it, and what it sorts by (its title). */
export function orderLabel(order: string, trans: TranslationBundle): [string, string] {
  const labels: Record<string, [string, string]> = {
    newest: [
      trans.__('Newest first'),
      trans.__('The last written or edited first: an edit brings a note to the top')
    ],
    oldest: [
      trans.__('Oldest first'),
      trans.__('In the order they were first written: edits do not move a note')
    ],
    priority: [
      trans.__('Highest priority first'),
      trans.__('High, then medium, then low; within each, the newest note first (edits do not move it)')
    ]
  };
  return labels[order] ?? [order, order];
}

export function changeLabel(kind: string, trans: TranslationBundle): string {
  const labels: Record<string, string> = {
    added: trans.__('added'),
    edited: trans.__('edited'),
    superseded: trans.__('superseded'),
    revoked: trans.__('forgotten'),
    refuted: trans.__('refuted'),
    reinstated: trans.__('reinstated'),
    purged: trans.__('purged'),
    became_stale: trans.__('became stale'),
    stale_anew: trans.__('still stale, for new reasons'),
    no_longer_stale: trans.__('no longer stale')
  };
  return labels[kind] ?? kind.replace(/_/g, ' ');
}
