/**
 * The panel's filters as values: none set, the tags of the tag box, the request
 * parameters they become, and a saved set read back (no requests, no state).
 */

import { IFilters, ORDERS, Order } from './types';

export const EMPTY_FILTERS: IFilters = {
  tags: '',
  kind: '',
  priority: '',
  stale: '',
  mine: false,
  author: '',
  order: 'newest'
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

/** The filters' request parameters shared by listing and recall (all but `stale`). */
export function filterParams(filters: IFilters): string[] {
  const params: string[] = [];
  const { kind, priority } = filters;
  const tags = tagList(filters.tags).join(',');
  if (tags) {
    params.push(`tags=${encodeURIComponent(tags)}`);
  }
  if (kind) {
    params.push(`kind=${encodeURIComponent(kind)}`);
  }
  if (priority) {
    params.push(`priority=${encodeURIComponent(priority)}`);
  }
  if (filters.mine) {
    params.push('mine=true');
  } else if (filters.author) {
    params.push(`author=${encodeURIComponent(filters.author)}`);
  }
  return params;
}

/** The list's `order=` parameter: none for the server's default (newest). */
export function orderParams(filters: IFilters): string[] {
  return filters.order === 'newest' ? [] : [`order=${filters.order}`];
}

/** Filters saved before a reload, read back field by field (whatever was stored). */
export function restoredFilters(f: Partial<IFilters>): IFilters {
  return {
    tags: typeof f.tags === 'string' ? f.tags : '',
    kind: typeof f.kind === 'string' ? f.kind : '',
    priority: typeof f.priority === 'string' ? f.priority : '',
    stale: f.stale === 'stale' || f.stale === 'fresh' ? f.stale : '',
    mine: f.mine === true,
    author: typeof f.author === 'string' ? f.author : '',
    order: ORDERS.includes(f.order as Order) ? (f.order as Order) : 'newest'
  };
}
