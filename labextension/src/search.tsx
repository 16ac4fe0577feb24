/**
 * The controls of the notes: the recall box, the Mine and author toggles, the tag, kind,
 * priority and staleness filters, the list's order, and the filters in words.
 */

import { TranslationBundle } from '@jupyterlab/translation';
import * as React from 'react';

import { tagList } from './filters';
import { thenFocus } from './focus';
import { kindLabel, orderLabel, priorityLabel } from './labels';
import { MemoryModel } from './model';
import { KINDS, ORDERS, Order, PRIORITIES } from './types';

/** How long typing waits before the search and tag boxes apply. */
const TYPING_MS = 400;

/** A text box that applies what is typed after a pause (or at once on Enter). */
function useTyped(
  value: string,
  apply: (text: string, entered: boolean) => void,
  same: (a: string, b: string) => boolean = (a, b) => a === b
): [string, (text: string) => void, () => void] {
  const [text, setText] = React.useState(value);
  const timer = React.useRef<number>();
  const latest = React.useRef(text);
  // The model changed it (a tag chip, a restored state, Clear): show that.
  React.useEffect(() => {
    if (!same(latest.current, value)) {
      latest.current = value;
      setText(value);
    }
  }, [value]);
  React.useEffect(() => () => window.clearTimeout(timer.current), []);
  const change = (next: string) => {
    latest.current = next;
    setText(next);
    window.clearTimeout(timer.current);
    timer.current = window.setTimeout(() => apply(next, false), TYPING_MS);
  };
  const now = () => {
    window.clearTimeout(timer.current);
    apply(latest.current, true);
  };
  return [text, change, now];
}

export function SearchBox(props: { model: MemoryModel }): JSX.Element {
  const { model } = props;
  const trans = model.trans;
  // Enter on the same words asks again (a keyword-only answer says to); typing waits.
  const [value, change, now] = useTyped(model.query, (text, entered) =>
    entered ? model.search(text) : model.setQuery(text)
  );
  return (
    <input
      className="nbm-Search jp-mod-styled"
      type="search"
      dir="auto"
      placeholder={trans.__('Recall: ask in any words…')}
      aria-label={trans.__('Recall')}
      value={value}
      onChange={event => change(event.target.value)}
      onKeyDown={event => {
        if (event.key === 'Enter') {
          now();
        }
      }}
    />
  );
}

/** Only the notes this Jupyter user wrote, listed or recalled (`mine=true`). */
export function MineToggle(props: { model: MemoryModel }): JSX.Element {
  const { model } = props;
  const trans = model.trans;
  const on = model.filters.mine;
  return (
    <button
      className={`nbm-MineFilter${on ? ' nbm-mod-active' : ''}`}
      aria-pressed={on}
      title={
        on
          ? trans.__('Showing only the notes you wrote: click to show everyone’s')
          : trans.__('Show only the notes you wrote')
      }
      onClick={() => model.setFilters({ mine: !on, author: '' })}
    >
      {trans.__('Mine')}
    </button>
  );
}

/** The author filter set by clicking a note's author, with the button that clears it. */
export function AuthorChip(props: { model: MemoryModel }): JSX.Element {
  const { model } = props;
  const trans = model.trans;
  return (
    <button
      className="nbm-AuthorFilter nbm-mod-active"
      aria-pressed={true}
      title={trans.__('Showing only the notes %1 wrote: click to show everyone’s', model.filters.author)}
      onClick={event => {
        // The chip goes with its filter: on to the search box, not the page's body.
        model.setFilters({ author: '' });
        thenFocus(event.currentTarget, Promise.resolve(), '.nbm-Search');
      }}
    >
      {trans.__('by %1 ✕', model.filters.author)}
    </button>
  );
}

export function Filters(props: { model: MemoryModel }): JSX.Element {
  const { model } = props;
  const trans = model.trans;
  const { filters } = model;
  const sameTags = (a: string, b: string) => tagList(a).join(',') === tagList(b).join(',');
  const [tags, change, now] = useTyped(
    filters.tags,
    text => model.setFilters({ tags: text }),
    sameTags
  );
  const active = tagList(filters.tags).length > 0;
  return (
    <div className="nbm-Filters">
      <input
        className={`nbm-TagFilter jp-mod-styled${active ? ' nbm-mod-active' : ''}`}
        placeholder={trans.__('tags')}
        aria-label={trans.__('Filter by tags (comma-separated)')}
        title={trans.__('Notes with all these tags (comma-separated)')}
        value={tags}
        onChange={event => change(event.target.value)}
        onKeyDown={event => {
          if (event.key === 'Enter') {
            now();
          }
        }}
      />
      <span className="nbm-Select">
        <select
          className={`nbm-KindFilter${filters.kind ? ' nbm-mod-active' : ''}`}
          aria-label={trans.__('Filter by kind')}
          title={trans.__('Kind')}
          value={filters.kind}
          onChange={event => model.setFilters({ kind: event.target.value })}
        >
          <option value="">{trans.__('kind')}</option>
          {KINDS.map(kind => (
            <option key={kind} value={kind}>
              {kindLabel(kind, trans)}
            </option>
          ))}
        </select>
      </span>
      <span className="nbm-Select">
        <select
          className={`nbm-PriorityFilter${filters.priority ? ' nbm-mod-active' : ''}`}
          aria-label={trans.__('Filter by priority')}
          title={trans.__('Priority')}
          value={filters.priority}
          onChange={event => model.setFilters({ priority: event.target.value })}
        >
          <option value="">{trans.__('priority')}</option>
          {PRIORITIES.map(priority => (
            <option key={priority} value={priority}>
              {priorityLabel(priority, trans)}
            </option>
          ))}
        </select>
      </span>
      <span className="nbm-Select">
        <select
          className={`nbm-StaleFilter${filters.stale ? ' nbm-mod-active' : ''}`}
          aria-label={trans.__('Filter by staleness')}
          title={trans.__('Stale or fresh')}
          value={filters.stale}
          onChange={event =>
            model.setFilters({ stale: event.target.value as '' | 'stale' | 'fresh' })
          }
        >
          <option value="">{trans.__('stale?')}</option>
          <option value="stale">{trans.__('stale')}</option>
          <option value="fresh">{trans.__('fresh')}</option>
        </select>
      </span>
    </div>
  );
}

/**
 * How the list is sorted, beside its count. A search ranks by score instead: then this
 * says so (not a control), and the order chosen comes back with the list.
 */
export function OrderSelect(props: { model: MemoryModel; searching: boolean }): JSX.Element {
  const { model } = props;
  const trans = model.trans;
  const order = model.filters.order;
  if (props.searching) {
    return (
      <span
        className="nbm-Ranked"
        title={trans.__(
          'Search results are ranked by how well they match; clear the search to see the list sorted again (%1)',
          orderLabel(order, trans)[0]
        )}
      >
        {trans.__('Best match first')}
      </span>
    );
  }
  return (
    <span className="nbm-Select nbm-Order">
      <select
        className="nbm-OrderFilter"
        aria-label={trans.__('Sort order')}
        title={orderLabel(order, trans)[1]}
        value={order}
        onChange={event => model.setFilters({ order: event.target.value as Order })}
      >
        {ORDERS.map(value => {
          const [label, title] = orderLabel(value, trans);
          return (
            <option key={value} value={value} title={title}>
              {label}
            </option>
          );
        })}
      </select>
    </span>
  );
}

/** The filters set, as the empty state names them: "kind: gotcha; tags: orders". */
export function describeFilters(model: MemoryModel, trans: TranslationBundle): string {
  const { tags, kind, priority, stale, mine, author } = model.filters;
  const parts: string[] = [];
  const tagged = tagList(tags);
  if (tagged.length) {
    parts.push(trans.__('tags: %1', tagged.join(', ')));
  }
  if (kind) {
    parts.push(trans.__('kind: %1', kindLabel(kind, trans)));
  }
  if (priority) {
    parts.push(trans.__('priority: %1', priorityLabel(priority, trans)));
  }
  if (stale) {
    parts.push(stale === 'stale' ? trans.__('stale only') : trans.__('fresh only'));
  }
  if (mine) {
    parts.push(trans.__('only yours'));
  } else if (author) {
    parts.push(trans.__('by %1', author));
  }
  return parts.join('; ');
}
