/**
 * The Notes tab: the search and filters, the empty state, the summary and notices, and
 * the list of cards with its pager.
 */

import * as React from 'react';

import { NoteCard } from './card';
import { NewNote } from './editor';
import { thenFocus } from './focus';
import { statusLabel } from './labels';
import { MAX_HITS, MemoryModel } from './model';
import { IPanelProps } from './props';
import {
  AuthorChip,
  Filters,
  MineToggle,
  OrderSelect,
  SearchBox,
  describeFilters
} from './search';
import { PhaseAndError } from './status';
import { IHit, INote } from './types';

export function NotesView(props: IPanelProps): JSX.Element {
  const { model } = props;
  const trans = model.trans;
  const searching = model.hits !== null;
  const items: { note: INote; score?: number }[] = searching
    ? model.hits!.map((hit: IHit) => ({ note: hit.note, score: hit.score }))
    : model.notes.map(note => ({ note }));
  const { tags, kind, priority, stale, mine, author } = model.filters;
  const filtered = !!(tags || kind || priority || stale || mine || author);
  const empty =
    model.loaded && !model.loading && items.length === 0 && !model.error && !!model.compatibility?.ok;
  // A note being edited stays, with its edit, when a write elsewhere takes it off this page.
  const shown = new Set(items.map(item => item.note.id));
  const away = [...model.edits.values()]
    .filter(edit => !shown.has(edit.base.id))
    .map(edit => edit.base);
  const more = searching && items.length >= model.recallSize && model.recallSize < MAX_HITS;
  const nothing =
    searching && filtered
      ? trans.__(
          'Nothing recalled with these filters (%1). Clear them or try other words.',
          describeFilters(model, trans)
        )
      : searching
        ? trans.__('Nothing recalled. Try other words.')
        : trans.__('No notes match these filters (%1).', describeFilters(model, trans));
  return (
    <>
      <div className="nbm-Controls">
        <div className="nbm-SearchRow">
          <SearchBox model={model} />
          {model.teamStore || model.filters.mine ? <MineToggle model={model} /> : null}
          {model.filters.author ? <AuthorChip model={model} /> : null}
        </div>
        <Filters model={model} />
      </div>
      {empty ? (
        <div className="nbm-Empty">
          {searching || filtered ? (
            <>
              {nothing}{' '}
              <button
                className="nbm-LinkButton nbm-ClearFilters"
                onClick={event => {
                  model.clearFilters();
                  thenFocus(event.currentTarget, Promise.resolve(), '.nbm-Search');
                }}
              >
                {trans.__('Clear the search and filters')}
              </button>
            </>
          ) : model.readOnly ? (
            <p>{trans.__('No notes in this team store yet.')}</p>
          ) : (
            <>
              <p>{trans.__('No notes yet.')}</p>
              <p>
                {trans.__(
                  'Write one with + above, with Remember… in a notebook cell’s context menu, or in a cell:'
                )}
              </p>
              <pre className="nbm-Example">
                %load_ext nbmemory{'\n'}%remember orders.amount is in cents before 2021
              </pre>
            </>
          )}
        </div>
      ) : null}
      <PhaseAndError model={model} />
      {model.draft ? <NewNote model={model} draft={model.draft} /> : null}
      {/* The order beside the count, not in the filters: they stay one row at 250 px. */}
      <div className="nbm-SummaryRow">
        <div className="nbm-Summary" role="status">
          {/* Nothing until the first page is in: "0 notes" flashed while it loaded. */}
          {model.loaded && (items.length || !empty) && !(model.error && !items.length)
            ? searching
              ? trans._n(
                  '%1 recalled for “%2”',
                  '%1 recalled for “%2”',
                  items.length,
                  model.hitsQuery || model.query.trim()
                )
              : trans._n('%1 note', '%1 notes', model.total)
            : ''}
          {empty && (searching || filtered) ? (
            // Shown above the controls' empty state; said here, where a change is announced.
            <span className="nbm-SrOnly">{nothing}</span>
          ) : null}
          {searching && model.filteredOut ? (
            <>
              {' ' +
                (items.length
                  ? trans.__('(%1 more below the score threshold:', model.filteredOut)
                  : trans.__('%1 below the score threshold:', model.filteredOut)) +
                ' '}
              <button
                className="nbm-LinkButton nbm-ShowBelow"
                onClick={event => {
                  const next = `.nbm-NoteList > .nbm-Note:nth-of-type(${items.length + 1})`;
                  thenFocus(event.currentTarget, model.showBelow(), next, '.nbm-Search');
                }}
              >
                {trans.__('show them')}
              </button>
              {items.length ? ')' : ''}
            </>
          ) : null}
        </div>
        {model.loaded && items.length ? (
          <OrderSelect model={model} searching={searching} />
        ) : null}
      </div>
      {model.behind ? (
        <div className="nbm-Banner nbm-Behind" role="status">
          {model.behind}
        </div>
      ) : null}
      {model.forgotten !== null && !model.readOnly ? (
        <div className="nbm-Forgotten">
          {trans.__('Forgot #%1.', model.forgotten) + ' '}
          <button
            className="nbm-LinkButton nbm-UndoForget"
            aria-label={trans.__('Undo: bring back #%1', model.forgotten)}
            onClick={event =>
              thenFocus(
                event.currentTarget,
                model.undoForget(model.forgotten!),
                `.nbm-Note[data-note-id="${model.forgotten}"]`,
                '.nbm-Search'
              )
            }
          >
            {trans.__('Undo')}
          </button>
        </div>
      ) : null}
      <ul className="nbm-NoteList">
        {away.map(note => (
          <NoteCard key={note.id} note={note} away={true} {...props} />
        ))}
        {items.map(item => (
          <NoteCard key={item.note.id} note={item.note} score={item.score} {...props} />
        ))}
        {more ? (
          <li className="nbm-PagerItem">
            <button
              className="nbm-Button nbm-MoreHits"
              onClick={event => {
                // The first of the new hits (the button is gone while they load).
                const next = `.nbm-NoteList > .nbm-Note:nth-of-type(${away.length + items.length + 1})`;
                thenFocus(event.currentTarget, model.moreHits(), next, '.nbm-MoreHits');
              }}
            >
              {trans.__('More')}
            </button>
          </li>
        ) : null}
        {searching && model.previously.length ? (
          <li className="nbm-Previously">
            {model.previously.map(hit => (
              <div key={hit.note.id}>
                {trans.__(
                  'Previously believed (#%1, %2):',
                  hit.note.id,
                  statusLabel(hit.note.status, trans)
                )}{' '}
                {hit.note.text}
                {hit.note.status === 'revoked' && !model.readOnly ? (
                  <>
                    {' '}
                    <button
                      className="nbm-LinkButton nbm-Reinstate"
                      aria-label={trans.__('Bring back #%1', hit.note.id)}
                      onClick={event =>
                        thenFocus(
                          event.currentTarget,
                          model.undoForget(hit.note.id),
                          `.nbm-Note[data-note-id="${hit.note.id}"]`,
                          '.nbm-Search'
                        )
                      }
                    >
                      {trans.__('Bring back')}
                    </button>
                  </>
                ) : null}
              </div>
            ))}
          </li>
        ) : null}
        {!searching && model.total > model.pageSize ? (
          <li className="nbm-PagerItem">
            <Pager model={model} />
          </li>
        ) : null}
      </ul>
    </>
  );
}

function Pager(props: { model: MemoryModel }): JSX.Element {
  const { model } = props;
  const trans = model.trans;
  const last = Math.min(model.offset + model.pageSize, model.total);
  const pager = React.useRef<HTMLDivElement>(null);
  // The buttons keep their classes (focus moves by them); their words follow the order.
  const [back, next] =
    model.filters.order === 'oldest'
      ? [trans.__('‹ Older'), trans.__('Newer ›')]
      : model.filters.order === 'priority'
        ? [trans.__('‹ Previous'), trans.__('Next ›')]
        : [trans.__('‹ Newer'), trans.__('Older ›')];
  // Another page starts at its top, not where the last one was scrolled to.
  const turn = (offset: number, pressed: string) => {
    const list = pager.current?.closest('.nbm-NoteList');
    if (list) {
      list.scrollTop = 0;
    }
    // At the first or last page the button pressed is disabled: then focus the other one.
    thenFocus(pager.current!, model.setPage(offset), () =>
      model.offset <= 0
        ? '.nbm-Older'
        : model.offset + model.pageSize >= model.total
          ? '.nbm-Newer'
          : pressed
    );
  };
  return (
    <div className="nbm-Pager" ref={pager}>
      <button
        className="nbm-Button nbm-Newer"
        disabled={model.offset === 0}
        onClick={() => turn(model.offset - model.pageSize, '.nbm-Newer')}
      >
        {back}
      </button>
      <span>{trans.__('%1–%2 of %3', model.offset + 1, last, model.total)}</span>
      <button
        className="nbm-Button nbm-Older"
        disabled={last >= model.total}
        onClick={() => turn(model.offset + model.pageSize, '.nbm-Older')}
      >
        {next}
      </button>
    </div>
  );
}
