import { IRenderMimeRegistry } from '@jupyterlab/rendermime';
import { TranslationBundle } from '@jupyterlab/translation';
import {
  addIcon,
  checkIcon,
  copyIcon,
  deleteIcon,
  editIcon,
  LabIcon,
  markdownIcon,
  refreshIcon,
  ToolbarButtonComponent
} from '@jupyterlab/ui-components';
import * as React from 'react';

import { redactAddress, teamStoreWhere } from './address';
import { NoteMarkdown } from './markdown';
import { IDraft, MAX_HITS, MemoryModel, age, describeStale, fieldOf, tagList } from './model';
import {
  ICheck,
  IHit,
  INote,
  ISnapshot,
  ISnapshotDiff,
  KINDS,
  PRIORITIES
} from './types';

/** What the panel asks the application to do (open files, touch notebooks, clipboard). */
export interface IActions {
  openSource(note: INote): void;
  insert(note: INote): void;
  copyRecall(note: INote): void;
  /** Run the note's check in the active notebook's kernel (`%memory check ID`). */
  recheck(note: INote): Promise<void>;
}

interface IPanelProps {
  model: MemoryModel;
  rendermime: IRenderMimeRegistry;
  actions: IActions;
}

/** How long typing waits before the search and tag boxes apply. */
const TYPING_MS = 400;
/** Past this many characters the editor suggests splitting the note. */
const LONG_NOTE = 2000;

export function MemoryPanelView(props: IPanelProps): JSX.Element {
  const { model } = props;
  const trans = model.trans;
  const panel = React.useRef<HTMLDivElement>(null);
  const drafting = React.useRef(false);
  React.useEffect(() => {
    // The new-note form closed (saved or cancelled) with focus in it: back to its + button.
    const active = document.activeElement;
    if (drafting.current && !model.draft && (!active || active === document.body)) {
      panel.current?.querySelector<HTMLElement>('button.nbm-NewNote, .nbm-NewNote button')?.focus();
    }
    drafting.current = !!model.draft;
  }, [model.draft]);
  return (
    <div className="nbm-Panel" ref={panel}>
      <div className="nbm-Header">
        <div
          className="nbm-Tabs"
          role="tablist"
          aria-label={trans.__('nbmemory views')}
          onKeyDown={event => moveBetweenTabs(event, model)}
        >
          {VIEWS.map(view => (
            <button
              key={view}
              id={`nbm-tab-${view}`}
              role="tab"
              aria-selected={model.view === view}
              aria-controls={model.view === view ? `nbm-tabpanel-${view}` : undefined}
              tabIndex={model.view === view ? 0 : -1}
              className={`nbm-Tab${model.view === view ? ' nbm-mod-active' : ''}`}
              onClick={() => model.setView(view)}
            >
              {view === 'notes' ? trans.__('Notes') : trans.__('Snapshots')}
            </button>
          ))}
        </div>
        {model.readOnly ? null : (
          <ToolbarButtonComponent
            className="nbm-NewNote"
            icon={addIcon}
            tooltip={trans.__('New note')}
            enabled={!!model.compatibility?.ok}
            noFocusOnClick={false}
            onClick={() => {
              model.setView('notes');
              model.startDraft();
            }}
          />
        )}
        <ToolbarButtonComponent
          className="nbm-Refresh"
          icon={refreshIcon}
          tooltip={trans.__('Refresh')}
          noFocusOnClick={false}
          onClick={() => void model.refresh({ force: true, status: true })}
        />
      </div>
      {model.teamStore ? <TeamStoreLine model={model} address={model.teamStore} /> : null}
      {model.compatibility && !model.compatibility.ok ? (
        <div className="nbm-Banner nbm-mod-error" role="alert">
          {model.compatibility.message}
        </div>
      ) : null}
      {model.readOnly ? (
        <div className="nbm-Banner nbm-ReadOnly" role="status">
          {model.readOnlyMessage}
        </div>
      ) : null}
      <div
        className="nbm-TabPanel"
        role="tabpanel"
        id={`nbm-tabpanel-${model.view}`}
        aria-labelledby={`nbm-tab-${model.view}`}
      >
        {model.view === 'notes' ? (
          <NotesView {...props} />
        ) : (
          <SnapshotsView model={model} rendermime={props.rendermime} />
        )}
      </div>
      <StatusLine model={model} />
    </div>
  );
}

const VIEWS = ['notes', 'snapshots'] as const;

/** Where an arrow, Home or End key moves from item ``at`` of ``count`` (wrapping), if anywhere. */
function arrowTarget(key: string, at: number, count: number): number | undefined {
  return {
    ArrowRight: (at + 1) % count,
    ArrowLeft: (at + count - 1) % count,
    Home: 0,
    End: count - 1
  }[key];
}

/** The tabs' keys (WAI-ARIA tabs): arrows, Home and End select and focus a tab. */
function moveBetweenTabs(event: React.KeyboardEvent, model: MemoryModel): void {
  const to = arrowTarget(event.key, VIEWS.indexOf(model.view), VIEWS.length);
  if (to === undefined) {
    return;
  }
  event.preventDefault();
  model.setView(VIEWS[to]);
  const list = event.currentTarget as HTMLElement;
  requestAnimationFrame(() => list.querySelector<HTMLElement>(`#nbm-tab-${VIEWS[to]}`)?.focus());
}

/**
 * After `done`, focus the first of `selectors` found in the panel holding `from` (once the
 * view has rendered): a keyboard user goes on from there, not from the page's body.
 */
function thenFocus(
  from: HTMLElement,
  done: Promise<unknown>,
  ...choices: (string | (() => string))[]
): void {
  const panel = from.closest('.nbm-Panel');
  let selectors: string[] = [];
  const find = (selector: string) => {
    const target = panel?.querySelector<HTMLElement>(selector);
    return target && !(target as HTMLButtonElement).disabled ? target : null;
  };
  // The first choice may take a few frames to render; the others are fallbacks.
  const attempt = (frames: number) => {
    const target =
      find(selectors[0]) ?? (frames > 30 ? selectors.slice(1).map(find).find(Boolean) : null);
    if (target) {
      target.focus();
    } else if (frames < 120) {
      requestAnimationFrame(() => attempt(frames + 1));
    }
  };
  void done.then(() => {
    // A choice may depend on what the action brought (read once it is done).
    selectors = choices.map(choice => (typeof choice === 'string' ? choice : choice()));
    requestAnimationFrame(() => attempt(0));
  });
}

/**
 * Where focus goes once the card holding `button` is gone (its note forgotten): the
 * next card, else the one before, else the search box; not the page's body.
 */
function focusAfterRemoval(button: HTMLElement): () => void {
  const card = button.closest('.nbm-Note');
  const panel = button.closest('.nbm-Panel');
  const neighbour = [card?.nextElementSibling, card?.previousElementSibling].find(
    element => element?.classList.contains('nbm-Note')
  ) as HTMLElement | undefined;
  const id = neighbour?.dataset.noteId;
  return () =>
    requestAnimationFrame(() => {
      const target =
        (id && panel?.querySelector<HTMLElement>(`.nbm-Note[data-note-id="${id}"]`)) ||
        panel?.querySelector<HTMLElement>('.nbm-Note') ||
        panel?.querySelector<HTMLElement>('.nbm-Search');
      target?.focus();
    });
}

/**
 * For an action that may take the card holding `node` off the page (a verify in a stale
 * list, cancelling the edit of a note that left it): afterwards, if it did and focus fell
 * to the page's body, the next card (or the search box) takes it.
 */
function ifCardLeaves(node: HTMLElement | null): () => void {
  const refocus = node ? focusAfterRemoval(node) : () => undefined;
  return () =>
    requestAnimationFrame(() => {
      const active = document.activeElement;
      if (node && !node.isConnected && (!active || active === document.body)) {
        refocus();
      }
    });
}

/** Under the tabs, for a team store: where it is (never who connects or a password). */
function TeamStoreLine(props: { model: MemoryModel; address: string }): JSX.Element {
  const { model, address } = props;
  const trans = model.trans;
  return (
    <div className="nbm-TeamStore" title={redactAddress(address)}>
      <span className="nbm-TeamStoreWhere">
        {trans.__('Team store · %1', teamStoreWhere(address))}
      </span>
      {model.readOnly ? (
        <span className="nbm-Badge nbm-ReadOnlyBadge">{trans.__('read-only')}</span>
      ) : null}
    </div>
  );
}

function PhaseLine(props: { model: MemoryModel }): JSX.Element | null {
  const { model } = props;
  const trans = model.trans;
  if (!model.phase) {
    return null;
  }
  const text = {
    starting: trans.__('Starting the memory service…'),
    'loading-model': trans.__(
      'Loading the model (the first recall after a start takes a few seconds)…'
    ),
    working: trans.__('Waiting for the memory service…')
  }[model.phase];
  return (
    <div className="nbm-Phase" role="status" data-phase={model.phase}>
      <span className="nbm-Spinner" aria-hidden="true" />
      {text}
    </div>
  );
}

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

function SearchBox(props: { model: MemoryModel }): JSX.Element {
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
function MineToggle(props: { model: MemoryModel }): JSX.Element {
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
function AuthorChip(props: { model: MemoryModel }): JSX.Element {
  const { model } = props;
  const trans = model.trans;
  return (
    <button
      className="nbm-AuthorFilter nbm-mod-active"
      aria-pressed={true}
      title={trans.__('Showing only the notes %1 wrote: click to show everyone’s', model.filters.author)}
      onClick={() => model.setFilters({ author: '' })}
    >
      {trans.__('by %1 ✕', model.filters.author)}
    </button>
  );
}

function Filters(props: { model: MemoryModel }): JSX.Element {
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

/** The filters set, as the empty state names them: "kind: gotcha; tags: orders". */
function describeFilters(model: MemoryModel, trans: TranslationBundle): string {
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

function kindLabel(kind: string, trans: TranslationBundle): string {
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
function statusLabel(status: string, trans: TranslationBundle): string {
  const labels: Record<string, string> = {
    revoked: trans.__('forgotten'),
    superseded: trans.__('superseded'),
    purged: trans.__('erased')
  };
  return labels[status] ?? status;
}

function priorityLabel(priority: string, trans: TranslationBundle): string {
  const labels: Record<string, string> = {
    high: trans.__('high'),
    medium: trans.__('medium'),
    low: trans.__('low')
  };
  return labels[priority] ?? priority;
}

function NotesView(props: IPanelProps): JSX.Element {
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
              {searching && filtered
                ? trans.__(
                    'Nothing recalled with these filters (%1). Clear them or try other words.',
                    describeFilters(model, trans)
                  )
                : searching
                  ? trans.__('Nothing recalled. Try other words.')
                  : trans.__('No notes match these filters (%1).', describeFilters(model, trans))}{' '}
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
      <PhaseLine model={model} />
      {model.error ? (
        <div className="nbm-Banner nbm-mod-error" role="alert">
          {model.error}
        </div>
      ) : null}
      {model.draft ? <NewNote model={model} draft={model.draft} /> : null}
      <div className="nbm-Summary" role="status">
        {(items.length || !empty) && !(model.error && !items.length)
          ? searching
            ? trans._n(
                '%1 recalled for “%2”',
                '%1 recalled for “%2”',
                items.length,
                model.hitsQuery || model.query.trim()
              )
            : trans._n('%1 note', '%1 notes', model.total)
          : ''}
        {searching && model.filteredOut ? (
          <>
            {' ' + trans.__('(%1 more below the score threshold:', model.filteredOut) + ' '}
            <button
              className="nbm-LinkButton nbm-ShowBelow"
              onClick={event => {
                const next = `.nbm-NoteList > .nbm-Note:nth-of-type(${items.length + 1})`;
                thenFocus(event.currentTarget, model.showBelow(), next, '.nbm-Search');
              }}
            >
              {trans.__('show them')}
            </button>
            {')'}
          </>
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
        {trans.__('‹ Newer')}
      </button>
      <span>{trans.__('%1–%2 of %3', model.offset + 1, last, model.total)}</span>
      <button
        className="nbm-Button nbm-Older"
        disabled={last >= model.total}
        onClick={() => turn(model.offset + model.pageSize, '.nbm-Older')}
      >
        {trans.__('Older ›')}
      </button>
    </div>
  );
}

/** What a note said before each edit, newest first, read when opened (and when it changes). */
function EarlierVersions(props: { model: MemoryModel; note: INote }): JSX.Element {
  const { model, note } = props;
  const trans = model.trans;
  const [versions, setVersions] = React.useState<INote[] | null>(null);
  const [error, setError] = React.useState<string | null>(null);
  React.useEffect(() => {
    let current = true;
    setVersions(null);
    setError(null);
    model.detail(note.id).then(
      detail => current && setVersions(detail.versions),
      reason => current && setError(model.wordsOf(reason))
    );
    return () => {
      current = false;
    };
  }, [model, note.id, note.version]);
  if (error) {
    return (
      <div className="nbm-Versions nbm-mod-error" role="alert">
        {error}
      </div>
    );
  }
  if (!versions) {
    return <div className="nbm-Versions">{trans.__('Reading earlier versions…')}</div>;
  }
  const earlier = versions.filter(v => v.version < note.version).reverse();
  return (
    <ol className="nbm-Versions" aria-label={trans.__('Earlier versions of #%1', note.id)}>
      {earlier.map(v => (
        <li key={v.version} className="nbm-VersionItem">
          <div className="nbm-VersionHead">
            {[
              `v${v.version}`,
              v.updated_at ? trans.__('%1 ago', age(v.updated_at, trans)) : '',
              v.author ? trans.__('by %1', v.author) : '',
              `${kindLabel(v.kind, trans)}, ${priorityLabel(v.priority, trans)}`,
              v.tags.length ? trans.__('tags: %1', v.tags.join(', ')) : trans.__('no tags')
            ]
              .filter(Boolean)
              .join(' · ')}
          </div>
          <div className="nbm-VersionText">{v.text}</div>
        </li>
      ))}
    </ol>
  );
}

function ActionButton(props: {
  className: string;
  icon: LabIcon;
  label: string;
  title?: string;
  /** The note it acts on, for screen readers ("Edit #12"). */
  noteId?: number;
  disabled?: boolean;
  onClick: (event: React.MouseEvent<HTMLButtonElement>) => void;
}): JSX.Element {
  return (
    <button
      className={`jp-Button jp-mod-minimal nbm-Action ${props.className}`}
      title={props.title ?? props.label}
      aria-label={props.noteId === undefined ? undefined : `${props.label} #${props.noteId}`}
      disabled={props.disabled}
      onClick={props.onClick}
    >
      <props.icon.react tag="span" className="nbm-ActionIcon" elementSize="small" />
      <span className="nbm-ActionLabel">{props.label}</span>
    </button>
  );
}

/**
 * A card's actions as one stop of the Tab key (a WAI-ARIA toolbar): the arrows, Home and
 * End move between its buttons, and Tab comes back to the one last used, so a list of
 * cards is not five stops a card.
 */
function Toolbar(props: {
  label: string;
  children: React.ReactNode;
  className?: string;
}): JSX.Element {
  const bar = React.useRef<HTMLDivElement>(null);
  const current = React.useRef(0);
  const buttons = () => [...(bar.current?.querySelectorAll<HTMLButtonElement>(':scope > button') ?? [])];
  const rove = () => {
    const all = buttons();
    if (!all[current.current] || all[current.current].disabled) {
      current.current = Math.max(0, all.findIndex(button => !button.disabled));
    }
    all.forEach((button, i) => (button.tabIndex = i === current.current ? 0 : -1));
  };
  React.useLayoutEffect(rove);
  return (
    <div
      ref={bar}
      className={props.className ?? 'nbm-Actions'}
      role="toolbar"
      aria-label={props.label}
      onFocus={event => {
        const at = buttons().findIndex(button => button === (event.target as Element));
        if (at >= 0) {
          current.current = at;
          rove();
        }
      }}
      onKeyDown={event => {
        const all = buttons().filter(button => !button.disabled);
        const at = all.findIndex(button => button === (event.target as Element));
        const to = arrowTarget(event.key, at, all.length);
        if (to !== undefined && all.length) {
          event.preventDefault();
          all[to].focus();
        }
      }}
    >
      {props.children}
    </div>
  );
}

/** A long note is shown clamped; a click (or Show more) opens it, Show less closes it. */
function ClampedText(props: { text: string; rendermime: IRenderMimeRegistry; trans: TranslationBundle }): JSX.Element {
  const { trans } = props;
  const [open, setOpen] = React.useState(false);
  const [overflows, setOverflows] = React.useState(false);
  const box = React.useRef<HTMLDivElement>(null);
  const measure = React.useCallback(() => {
    const node = box.current;
    if (node && !open) {
      setOverflows(node.scrollHeight > node.clientHeight + 2);
    }
  }, [open]);
  React.useEffect(() => {
    const node = box.current;
    if (!node || typeof ResizeObserver === 'undefined') {
      return;
    }
    const observer = new ResizeObserver(() => measure());
    observer.observe(node);
    return () => observer.disconnect();
  }, [measure]);
  const clamped = !open;
  return (
    <div className="nbm-TextBox">
      <div
        ref={box}
        className={`nbm-Clamp${clamped ? ' nbm-mod-clamped' : ''}${clamped && overflows ? ' nbm-mod-overflowing' : ''}`}
        onClick={event => {
          if (clamped && overflows && !(event.target as HTMLElement).closest('a')) {
            setOpen(true);
          }
        }}
      >
        <NoteMarkdown text={props.text} rendermime={props.rendermime} onRendered={measure} />
      </div>
      {overflows || open ? (
        <button
          className="nbm-LinkButton nbm-Expand"
          aria-expanded={open}
          onClick={() => setOpen(!open)}
        >
          {open ? trans.__('Show less') : trans.__('Show more')}
        </button>
      ) : null}
    </div>
  );
}

function NoteCard(
  props: IPanelProps & { note: INote; score?: number; away?: boolean }
): JSX.Element {
  const { note, model, actions } = props;
  const trans = model.trans;
  // A reader of a team store gets no write action: no edit box, Re-check, Verify, Forget.
  const writable = !model.readOnly;
  const edit = writable ? model.edits.get(note.id) : undefined;
  const stale = note.stale.length > 0;
  const activeTags = tagList(model.filters.tags);
  const reasons = note.stale.map(r => describeStale(r, trans)).join('; ');
  const check = model.checks.get(note.id);
  const [checking, setChecking] = React.useState(false);
  const [showVersions, setShowVersions] = React.useState(false);
  const card = React.useRef<HTMLLIElement>(null);
  const wasEditing = React.useRef(false);
  React.useEffect(() => {
    // Saved or cancelled: the editor that had focus is gone; go back to the card's Edit.
    const active = document.activeElement;
    if (wasEditing.current && !edit && (!active || active === document.body)) {
      card.current?.querySelector<HTMLElement>('.nbm-Edit')?.focus();
    }
    wasEditing.current = !!edit;
  }, [edit]);
  return (
    <li
      ref={card}
      className={`nbm-Note nbm-mod-${note.priority}${stale ? ' nbm-mod-stale' : ''}`}
      data-note-id={note.id}
      tabIndex={-1}
    >
      <div className="nbm-NoteHeader">
        <span className="nbm-NoteId">#{note.id}</span>
        <span className={`nbm-Badge nbm-Priority nbm-mod-${note.priority}`}>
          {priorityLabel(note.priority, trans)}
        </span>
        <span className="nbm-Badge nbm-Kind">{kindLabel(note.kind, trans)}</span>
        {stale ? (
          <span className="nbm-Badge nbm-StaleBadge" title={reasons}>
            {trans.__('stale')}
          </span>
        ) : null}
        {note.version > 1 ? (
          <button
            className="nbm-LinkButton nbm-Version"
            aria-expanded={showVersions}
            aria-label={trans.__('v%1: earlier versions of #%2', note.version, note.id)}
            title={trans.__('Version %1: show what it said before', note.version)}
            onClick={() => setShowVersions(!showVersions)}
          >
            v{note.version}
          </button>
        ) : null}
        {props.score !== undefined ? (
          <span
            className="nbm-Score"
            title={trans.__(
              'Recall score: how well the note matches your words and their meaning (higher is better)'
            )}
          >
            {trans.__('score %1', props.score.toFixed(2))}
          </span>
        ) : null}
      </div>
      {note.tags.length ? (
        // One tab stop, arrows between them: 50 tags were 50 Tab presses past a card.
        <Toolbar className="nbm-Tags" label={trans.__('Tags of #%1', note.id)}>
          {note.tags.map(tag => {
            const on = activeTags.includes(tag);
            return (
              <button
                key={tag}
                className={`nbm-Tag${on ? ' nbm-mod-active' : ''}`}
                aria-pressed={on}
                title={
                  on
                    ? trans.__('Stop filtering by %1', tag)
                    : trans.__('Show only notes tagged %1', tag)
                }
                onClick={() => model.toggleTag(tag)}
              >
                {tag}
              </button>
            );
          })}
        </Toolbar>
      ) : null}
      {stale ? (
        <div className="nbm-StaleReason">{trans.__('Stale: %1', reasons)}</div>
      ) : null}
      {edit ? (
        <NoteEditor
          model={model}
          initial={edit.draft}
          pristine={{
            text: edit.base.text,
            kind: edit.base.kind,
            priority: edit.base.priority,
            tags: edit.base.tags.join(', ')
          }}
          notice={
            props.away && model.error
              ? // The list did not load: nothing says the note moved.
                model.errorUnreachable
                ? trans.__(
                    "JupyterLab's server is not responding: your edit is kept here; save it once the server is back."
                  )
                : trans.__('The list could not be loaded (see above): your edit is kept here.')
              : props.away
              ? trans.__(
                  'This note is no longer on this page (a write elsewhere moved it): save or cancel your edit here.'
                )
              : note.version !== edit.base.version
                ? trans.__(
                    'Changed elsewhere while you edit it (now version %1): saving writes only the fields you changed, over that version.',
                    note.version
                  )
                : undefined
          }
          conflict={edit.conflict ? conflictOf(edit.conflict, trans) : undefined}
          saveLabel={trans.__('Save as new version')}
          onChange={draft => model.updateEdit(note.id, draft)}
          onCancel={() => {
            const after = ifCardLeaves(card.current);
            model.endEdit(note.id);
            after();
          }}
          onSave={async draft => {
            await model.saveEdit(note.id, draft);
          }}
          onSaveOver={async draft => {
            await model.saveEdit(note.id, draft, true);
          }}
        />
      ) : (
        <ClampedText text={note.text} rendermime={props.rendermime} trans={trans} />
      )}
      {showVersions ? <EarlierVersions model={model} note={note} /> : null}
      {check ? <CheckLine check={check} note={note} trans={trans} /> : null}
      <Provenance
        note={note}
        actions={actions}
        trans={trans}
        byAuthor={author => model.setFilters({ author, mine: false })}
      />
      {edit ? null : (
        <Toolbar label={trans.__('Actions for #%1', note.id)}>
          {check && writable ? (
            <ActionButton
              className="nbm-Recheck"
              noteId={note.id}
              icon={refreshIcon}
              label={checking ? trans.__('Re-checking…') : trans.__('Re-check')}
              title={trans.__(
                "Run this note's check now in the active notebook's kernel (%memory check %1)",
                note.id
              )}
              disabled={checking}
              onClick={() => {
                setChecking(true);
                void actions.recheck(note).finally(() => setChecking(false));
              }}
            />
          ) : null}
          {writable ? (
            <>
              <ActionButton
                className="nbm-Edit"
                noteId={note.id}
                icon={editIcon}
                label={trans.__('Edit')}
                title={trans.__('Edit (saved as a new version)')}
                onClick={() => model.startEdit(note)}
              />
              <ActionButton
                className="nbm-Verify"
                noteId={note.id}
                icon={checkIcon}
                label={trans.__('Verify')}
                title={trans.__('It still holds: re-take the fingerprints of what it is about')}
                onClick={event => {
                  const after = ifCardLeaves(event.currentTarget);
                  void model.verify(note.id).then(after);
                }}
              />
              <ActionButton
                className="nbm-Forget"
                noteId={note.id}
                icon={deleteIcon}
                label={trans.__('Forget')}
                title={trans.__('Forget (you can undo it)')}
                onClick={event => {
                  const refocus = focusAfterRemoval(event.currentTarget);
                  void model.forget(note.id).then(done => done && refocus());
                }}
              />
            </>
          ) : null}
          <ActionButton
            className="nbm-Copy"
            noteId={note.id}
            icon={copyIcon}
            label={trans.__('Copy %recall')}
            title={trans.__('Copy a %recall line for this note')}
            onClick={() => actions.copyRecall(note)}
          />
          <ActionButton
            className="nbm-Insert"
            noteId={note.id}
            icon={markdownIcon}
            label={trans.__('Insert')}
            title={trans.__('Insert into the active notebook as a Markdown cell')}
            onClick={() => actions.insert(note)}
          />
        </Toolbar>
      )}
    </li>
  );
}

/**
 * A note's check: its code, and when it last held or failed, with the value then. All of
 * it is text (React escapes it): an expression or a value is never markup.
 */
function CheckLine(props: { check: ICheck; note: INote; trans: TranslationBundle }): JSX.Element {
  const { check, note, trans } = props;
  const last = check.last;
  const status = last ? last.status : 'written';
  const ago = (when: string | null | undefined) =>
    when ? trans.__('%1 ago', age(when, trans)) : '';
  let outcome: string;
  if (!last) {
    const when = ago(check.written_at);
    outcome = check.value
      ? trans.__('held when written (%1), value %2; not re-checked since', when, check.value)
      : trans.__('held when written (%1); not re-checked since', when);
  } else if (last.status === 'passed') {
    outcome = last.value
      ? trans.__('held %1, value %2', ago(last.at), last.value)
      : trans.__('held %1', ago(last.at));
  } else if (last.status === 'failed') {
    outcome = last.value
      ? trans.__('failed %1, value %2', ago(last.at), last.value)
      : trans.__('failed %1', ago(last.at));
  } else if (last.status === 'error') {
    outcome = trans.__('raised an error %1: %2', ago(last.at), last.error ?? '');
  } else if (last.status === 'skipped') {
    outcome = trans.__('skipped %1: %2', ago(last.at), last.why ?? '');
  } else {
    outcome = `${last.status} ${ago(last.at)}`;
  }
  const by = last?.by ? ` · ${trans.__('by %1', last.by)}` : '';
  return (
    <div
      className={`nbm-Check nbm-mod-${status}${check.trusted ? '' : ' nbm-mod-untrusted'}`}
      data-status={status}
    >
      <div className="nbm-CheckHead">
        <span className="nbm-CheckLabel">{trans.__('check')}</span>{' '}
        <code className="nbm-CheckExpr">{check.expression}</code>
      </div>
      <div className="nbm-CheckLast" title={last?.at ?? check.written_at ?? ''}>
        {outcome}
        {by}
      </div>
      {check.trusted ? null : (
        <div className="nbm-CheckUntrusted">
          {trans.__(
            'Not trusted: written by %1. It is code and does not run until you read it above and run %memory trust %2 in a notebook.',
            note.author ?? trans.__('someone else'),
            note.id
          )}
        </div>
      )}
    </div>
  );
}

function Provenance(props: {
  note: INote;
  actions: IActions;
  trans: TranslationBundle;
  /** Keep only this author's notes (clicking the author's name). */
  byAuthor: (author: string) => void;
}): JSX.Element {
  const { note, actions, trans, byAuthor } = props;
  const p = note.provenance;
  let where = '';
  if (p.notebook) {
    where = note.lab_path ?? p.notebook;
    if (p.execution_count !== undefined && p.execution_count !== null) {
      where += ` [${p.execution_count}]`;
    }
  } else {
    where = p.source
      ? trans.__('not from a notebook (%1)', p.source)
      : trans.__('not from a notebook');
  }
  const git = p.git_commit
    ? ` @ ${p.git_branch ?? '?'}:${String(p.git_commit).slice(0, 8)}${p.git_dirty ? ' ' + trans.__('(dirty)') : ''}`
    : '';
  return (
    <div className="nbm-Provenance">
      {note.lab_path ? (
        <a
          href="#"
          className="nbm-SourceLink"
          title={
            p.cell_id
              ? trans.__('Open %1 at the cell', note.lab_path)
              : trans.__('Open %1', note.lab_path)
          }
          onClick={event => {
            event.preventDefault();
            actions.openSource(note);
          }}
        >
          {where}
        </a>
      ) : (
        <span>{where}</span>
      )}
      {git}
      {note.author ? (
        <>
          {' · '}
          <button
            className="nbm-Author nbm-LinkButton"
            title={trans.__('Written by %1: click to show only their notes', note.author)}
            onClick={() => byAuthor(note.author!)}
          >
            {note.author}
          </button>
        </>
      ) : null}
      {note.created_at ? (
        <>
          {' · '}
          {/* Here, not in the header: "3 d ago" wrapped the header at the 250 px sidebar. */}
          <span className="nbm-Age" title={note.created_at}>
            {trans.__('%1 ago', age(note.created_at, trans))}
          </span>
        </>
      ) : null}
    </div>
  );
}

/** What the editor says when a save found its fields changed elsewhere too. */
function conflictOf(
  conflict: { note: INote; fields: string[] },
  trans: TranslationBundle
): { message: string; theirs: string } {
  const { note, fields } = conflict;
  const names: Record<string, string> = {
    text: trans.__('text'),
    kind: trans.__('kind'),
    priority: trans.__('priority'),
    tags: trans.__('tags')
  };
  return {
    message: trans.__(
      'Not saved: version %1, written elsewhere while you edited, changed the %2 too. It says:',
      note.version,
      fields.map(name => names[name] ?? name).join(', ')
    ),
    theirs: fields
      .map(name =>
        name === 'text'
          ? note.text
          : `${names[name] ?? name}: ${fieldOf(note, name, ', ')}`
      )
      .join('\n')
  };
}

/** The form that writes a note: a new one (the draft) or a new version of one. */
function NoteEditor(props: {
  model: MemoryModel;
  initial: IDraft;
  /** What counts as unchanged (Escape discards without asking): default `initial`. */
  pristine?: IDraft;
  /** Said above the text: why this edit needs a second look. */
  notice?: string;
  /** The same fields changed elsewhere: theirs, with Save mine over it / Keep theirs. */
  conflict?: { message: string; theirs: string };
  onSaveOver?: (draft: IDraft) => Promise<void>;
  saveLabel: string;
  where?: string;
  autoFocus?: boolean;
  onChange?: (draft: IDraft) => void;
  onSave: (draft: IDraft) => Promise<void>;
  onCancel: () => void;
}): JSX.Element {
  const { model, initial } = props;
  const trans = model.trans;
  const [text, setText] = React.useState(initial.text);
  const [kind, setKind] = React.useState(initial.kind);
  const [priority, setPriority] = React.useState(initial.priority);
  const [tags, setTags] = React.useState(initial.tags);
  const [problem, setProblem] = React.useState<string | null>(null);
  const [saving, setSaving] = React.useState(false);
  // Escape with changes asks once: a second Escape discards them.
  const [discarding, setDiscarding] = React.useState(false);
  const area = React.useRef<HTMLTextAreaElement>(null);
  const pristine = props.pristine ?? initial;
  const dirty =
    text.trim() !== pristine.text.trim() ||
    kind !== pristine.kind ||
    priority !== pristine.priority ||
    tags !== pristine.tags;
  React.useEffect(() => {
    props.onChange?.({ ...initial, text, kind, priority, tags });
    setDiscarding(false);
  }, [text, kind, priority, tags]);
  React.useEffect(() => {
    const node = area.current;
    if (node && props.autoFocus !== false) {
      // Typing goes on after the text (focus() alone puts the caret before it).
      node.focus();
      node.setSelectionRange(node.value.length, node.value.length);
      node.scrollTop = node.scrollHeight;
    }
  }, []);
  // Grow with the text, between about 6 and 24 lines.
  React.useLayoutEffect(() => {
    const node = area.current;
    if (node) {
      node.style.height = 'auto';
      node.style.height = `${Math.min(Math.max(node.scrollHeight + 2, 110), 420)}px`;
    }
  }, [text]);
  const save = (over = false) => {
    if (!text.trim()) {
      setProblem(trans.__('The note is empty: write what you found, or press Escape to cancel.'));
      area.current?.focus();
      return;
    }
    setProblem(null);
    setSaving(true);
    const draft = { ...initial, text, kind, priority, tags };
    void (over && props.onSaveOver ? props.onSaveOver(draft) : props.onSave(draft)).finally(
      () => setSaving(false)
    );
  };
  return (
    <div
      className="nbm-Editor"
      onKeyDown={event => {
        if (event.key === 'Escape') {
          event.preventDefault();
          event.stopPropagation();
          if (dirty && !discarding) {
            setDiscarding(true);
          } else {
            props.onCancel();
          }
        } else if (event.key === 'Enter' && (event.ctrlKey || event.metaKey)) {
          event.preventDefault();
          event.stopPropagation();
          save();
        }
      }}
    >
      {props.where ? <div className="nbm-EditWhere">{props.where}</div> : null}
      {props.notice && !props.conflict ? (
        <div className="nbm-EditNotice" role="status">
          {props.notice}
        </div>
      ) : null}
      {props.conflict ? (
        <div className="nbm-Conflict" role="alert">
          <div>{props.conflict.message}</div>
          <pre className="nbm-ConflictTheirs">{props.conflict.theirs}</pre>
          <div className="nbm-ConflictActions">
            <button
              className="jp-Button jp-mod-styled jp-mod-accept nbm-SaveOver"
              disabled={saving}
              onClick={() => save(true)}
            >
              {trans.__('Save mine over it')}
            </button>
            <button
              className="jp-Button jp-mod-styled jp-mod-reject nbm-KeepTheirs"
              onClick={() => props.onCancel()}
            >
              {trans.__('Keep theirs')}
            </button>
          </div>
        </div>
      ) : null}
      <textarea
        ref={area}
        className="nbm-EditText jp-mod-styled"
        aria-label={trans.__('Note text (Markdown)')}
        placeholder={trans.__('What did you find? Markdown works.')}
        value={text}
        onChange={event => {
          setText(event.target.value);
          if (problem) {
            setProblem(null);
          }
        }}
      />
      {problem ? (
        <div className="nbm-EditProblem" role="alert">
          {problem}
        </div>
      ) : discarding ? (
        <div className="nbm-EditProblem nbm-Discard" role="alert">
          {trans.__('Press Escape again to discard your changes, or Ctrl+Enter to save them.')}
        </div>
      ) : text.length > LONG_NOTE ? (
        <div className="nbm-EditHint">
          {trans.__(
            'A long note (%1 characters): one finding per note is easier to recall and to keep fresh.',
            text.length
          )}
        </div>
      ) : null}
      <div className="nbm-EditFields">
        <span className="nbm-Select">
          <select
            className="nbm-EditKind"
            aria-label={trans.__('Kind')}
            title={trans.__('Kind')}
            value={kind}
            onChange={event => setKind(event.target.value)}
          >
            {KINDS.map(k => (
              <option key={k} value={k}>
                {kindLabel(k, trans)}
              </option>
            ))}
          </select>
        </span>
        <span className="nbm-Select">
          <select
            className="nbm-EditPriority"
            aria-label={trans.__('Priority')}
            title={trans.__('Priority')}
            value={priority}
            onChange={event => setPriority(event.target.value)}
          >
            {PRIORITIES.map(p => (
              <option key={p} value={p}>
                {priorityLabel(p, trans)}
              </option>
            ))}
          </select>
        </span>
        <input
          className="nbm-EditTags jp-mod-styled"
          aria-label={trans.__('Tags')}
          placeholder={trans.__('tags, comma-separated')}
          value={tags}
          onChange={event => setTags(event.target.value)}
        />
      </div>
      <div className="nbm-EditButtons">
        <button
          className="jp-Button jp-mod-accept jp-mod-styled nbm-Save"
          disabled={saving}
          onClick={() => save()}
          title={trans.__('Save (Ctrl+Enter)')}
        >
          {props.saveLabel}
        </button>
        <button
          className="jp-Button jp-mod-reject jp-mod-styled nbm-Cancel"
          onClick={props.onCancel}
          title={trans.__('Cancel (Escape)')}
        >
          {trans.__('Cancel')}
        </button>
      </div>
    </div>
  );
}

function NewNote(props: { model: MemoryModel; draft: IDraft }): JSX.Element {
  const { model, draft } = props;
  const trans = model.trans;
  // A new draft (another Remember…) replaces the form's content.
  const [generation, setGeneration] = React.useState(0);
  React.useEffect(() => {
    const bump = () => setGeneration(g => g + 1);
    model.draftStarted.connect(bump);
    return () => {
      model.draftStarted.disconnect(bump);
    };
  }, [model]);
  const form = React.useRef<HTMLDivElement>(null);
  return (
    <div className="nbm-NewNote-Form" role="form" aria-label={trans.__('New note')} ref={form}>
      <div className="nbm-FormTitle">{trans.__('New note')}</div>
      <NoteEditor
        key={generation}
        model={model}
        initial={draft}
        where={draft.where ? trans.__('From %1', draft.where) : undefined}
        saveLabel={trans.__('Remember')}
        onCancel={() => model.cancelDraft()}
        onSave={async next => {
          let saved: INote | null = null;
          const done = model.saveDraft(next).then(note => {
            saved = note;
          });
          if (form.current) {
            // Focus goes to the new note once listed (the page's body had it).
            thenFocus(
              form.current,
              done,
              () => (saved ? `.nbm-Note[data-note-id="${saved.id}"]` : '.nbm-EditText'),
              'button.nbm-NewNote, .nbm-NewNote button',
              '.nbm-Search'
            );
          }
          await done;
        }}
      />
    </div>
  );
}

function SnapshotsView(props: {
  model: MemoryModel;
  rendermime: IRenderMimeRegistry;
}): JSX.Element {
  const { model } = props;
  const trans = model.trans;
  const [from, setFrom] = React.useState('');
  const [to, setTo] = React.useState('');
  const names = model.snapshots.map(s => s.name);
  return (
    <div className="nbm-Snapshots">
      <PhaseLine model={model} />
      {model.error ? (
        <div className="nbm-Banner nbm-mod-error" role="alert">
          {model.error}
        </div>
      ) : null}
      {model.snapshots.length === 0 ? (
        <div className="nbm-Empty">
          {!model.loaded
            ? ''
            : model.readOnly
              ? trans.__('No snapshots yet.')
              : trans.__("No snapshots yet. Seal one in a notebook with %snapshot NAME -m 'why'.")}
        </div>
      ) : (
        <table className="nbm-SnapshotTable">
          <colgroup>
            <col className="nbm-ColName" />
            <col className="nbm-ColAt" />
            <col className="nbm-ColCount" />
            <col className="nbm-ColMessage" />
          </colgroup>
          <thead>
            <tr>
              <th>{trans.__('name')}</th>
              <th>{trans.__('sealed')}</th>
              <th>{trans.__('notes')}</th>
              <th>{trans.__('message')}</th>
            </tr>
          </thead>
          <tbody>
            {model.snapshots.map((s: ISnapshot) => (
              <tr key={s.name}>
                <td className="nbm-SnapshotName" title={s.name}>
                  {s.name}
                </td>
                <td title={s.at}>{trans.__('%1 ago', age(s.at, trans))}</td>
                <td className="nbm-SnapshotCount">
                  {trans._n('%1 note', '%1 notes', s.note_count)}
                </td>
                <td className="nbm-SnapshotMessage">{s.message}</td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      {model.snapshots.length ? (
        <div className="nbm-DiffControls">
          <span className="nbm-Select">
            <select
              className="nbm-DiffFrom"
              aria-label={trans.__('Compare from')}
              value={from}
              onChange={event => setFrom(event.target.value)}
            >
              <option value="">{trans.__('from…')}</option>
              {names.map(n => (
                <option key={n} value={n}>
                  {n}
                </option>
              ))}
            </select>
          </span>
          <span className="nbm-Select">
            <select
              className="nbm-DiffTo"
              aria-label={trans.__('Compare to')}
              value={to}
              onChange={event => setTo(event.target.value)}
            >
              <option value="">{trans.__('now')}</option>
              {names.map(n => (
                <option key={n} value={n}>
                  {n}
                </option>
              ))}
            </select>
          </span>
          <button
            className="jp-Button jp-mod-styled nbm-Compare"
            disabled={!from}
            onClick={() => void model.diffSnapshots(from, to)}
          >
            {trans.__('Compare')}
          </button>
        </div>
      ) : null}
      {model.diffError ? (
        <div className="nbm-Banner nbm-mod-error nbm-DiffError" role="alert">
          {model.diffError}
        </div>
      ) : null}
      {model.diff ? (
        <DiffView diff={model.diff} trans={trans} rendermime={props.rendermime} />
      ) : null}
    </div>
  );
}

/** The order of change kinds in a snapshot diff. */
const CHANGE_ORDER = [
  'added',
  'edited',
  'superseded',
  'revoked',
  'reinstated',
  'purged',
  'became_stale',
  'stale_anew',
  'no_longer_stale'
];

function changeLabel(kind: string, trans: TranslationBundle): string {
  const labels: Record<string, string> = {
    added: trans.__('added'),
    edited: trans.__('edited'),
    superseded: trans.__('superseded'),
    revoked: trans.__('forgotten'),
    reinstated: trans.__('reinstated'),
    purged: trans.__('purged'),
    became_stale: trans.__('became stale'),
    stale_anew: trans.__('still stale, for new reasons'),
    no_longer_stale: trans.__('no longer stale')
  };
  return labels[kind] ?? kind.replace(/_/g, ' ');
}

/** Why a note became stale in the panel's words ("content changed x.py"), else the detail. */
function changeDetail(change: ISnapshotDiff['changes'][0], trans: TranslationBundle): string {
  return change.reasons?.length
    ? change.reasons.map(r => describeStale(r, trans)).join('; ')
    : change.detail;
}

/** A diff line shows the start of a long note, not all of it. */
const DIFF_TEXT = 240;
/** A section of more changes than this is folded (its title and count), opened on demand. */
const DIFF_FOLD = 50;

/** The start of a long note, cut at a word, for a diff line. */
function diffText(text: string): string {
  if (text.length <= DIFF_TEXT) {
    return text;
  }
  const cut = text.slice(0, DIFF_TEXT);
  const space = cut.search(/\s\S*$/);
  return (space > DIFF_TEXT / 2 ? cut.slice(0, space) : cut) + ' …';
}

function DiffView(props: {
  diff: ISnapshotDiff;
  trans: TranslationBundle;
  rendermime: IRenderMimeRegistry;
}): JSX.Element {
  const { diff, trans } = props;
  const groups = new Map<string, ISnapshotDiff['changes']>();
  for (const change of diff.changes) {
    groups.set(change.change, [...(groups.get(change.change) ?? []), change]);
  }
  const rank = (kind: string) => {
    const index = CHANGE_ORDER.indexOf(kind);
    return index < 0 ? CHANGE_ORDER.length : index;
  };
  const kinds = [...groups.keys()].sort((a, b) => rank(a) - rank(b));
  return (
    <div className="nbm-Diff">
      <div className="nbm-DiffHeading">
        {diff.a} → {diff.b}
      </div>
      {diff.changes.length === 0 ? (
        <div className="nbm-Empty">{trans.__('No changes between these snapshots.')}</div>
      ) : null}
      {kinds.map(kind => (
        <DiffSection
          key={`${diff.a}\u0000${diff.b}\u0000${kind}`}
          kind={kind}
          changes={groups.get(kind)!}
          trans={trans}
          rendermime={props.rendermime}
        />
      ))}
    </div>
  );
}

/** One kind of change: its title and count, then the notes (folded past DIFF_FOLD). */
function DiffSection(props: {
  kind: string;
  changes: ISnapshotDiff['changes'];
  trans: TranslationBundle;
  rendermime: IRenderMimeRegistry;
}): JSX.Element {
  const { kind, changes, trans } = props;
  const folded = changes.length > DIFF_FOLD;
  const [open, setOpen] = React.useState(false);
  const title = `${changeLabel(kind, trans)} (${changes.length})`;
  // A folded section renders its notes only once opened: 500 of them are not drawn unseen.
  const list =
    !folded || open ? (
      <ul>
        {changes.map(change => (
          <li key={change.note.id} className="nbm-DiffItem">
            <span className="nbm-NoteId">#{change.note.id}</span>
            {change.detail ? (
              <span className="nbm-DiffDetail"> ({changeDetail(change, props.trans)})</span>
            ) : null}
            {!change.note.text ? (
              <span className="nbm-DiffErased"> {trans.__('(text erased)')}</span>
            ) : (
              // Rendered as a card renders it: Markdown, raw HTML as text, sanitized.
              <NoteMarkdown text={diffText(change.note.text)} rendermime={props.rendermime} />
            )}
          </li>
        ))}
      </ul>
    ) : null;
  return (
    <div className={`nbm-DiffSection nbm-mod-${kind}`}>
      {folded ? (
        <details
          className="nbm-DiffFold"
          open={open}
          onToggle={event => setOpen((event.currentTarget as HTMLDetailsElement).open)}
        >
          <summary className="nbm-DiffTitle">{title}</summary>
          {list}
        </details>
      ) : (
        <>
          <div className="nbm-DiffTitle">{title}</div>
          {list}
        </>
      )}
    </div>
  );
}

function StatusLine(props: { model: MemoryModel }): JSX.Element {
  const { model } = props;
  const trans = model.trans;
  if (model.statusError) {
    // The banner above says it already when the listing failed the same way.
    const same = model.statusError === model.error;
    return (
      <div className="nbm-Status nbm-mod-error" title={model.statusError}>
        {model.statusUnreachable
          ? // Jupyter's server did not answer: the memory service is not the one to blame.
            same
            ? trans.__("JupyterLab's server: not responding (see above)")
            : model.statusError
          : same
            ? trans.__('memory service: unavailable (see above)')
            : model.statusError}
      </div>
    );
  }
  const s = model.status;
  if (!s) {
    return <div className="nbm-Status">…</div>;
  }
  const store = redactAddress(s.store);
  const where = `${store}${s.store_reason ? ` (${s.store_reason})` : ''}`;
  if (!s.running) {
    return (
      <div className="nbm-Status" title={where}>
        <span className="nbm-StatusStore">{store}</span>
        <span className="nbm-StatusOwner">
          {trans.__('memory service: not running (it starts on the next request)')}
        </span>
      </div>
    );
  }
  const pid = s.owner_pid ?? s.pid;
  const owner = s.owner ? `${s.owner}${pid ? ` (pid ${pid})` : ''}` : '';
  return (
    <div className="nbm-Status" title={where}>
      <span className="nbm-StatusStore">{store}</span>
      <span className="nbm-StatusCount">{trans._n('%1 note', '%1 notes', s.notes ?? 0)}</span>
      {s.stale ? (
        <span className="nbm-StatusStale">{trans._n('%1 stale', '%1 stale', s.stale)}</span>
      ) : null}
      <span className="nbm-StatusModel">{s.model}</span>
      {s.model_loading ? (
        <span className="nbm-StatusLoading">
          {trans.__('loading the model: keyword results meanwhile')}
        </span>
      ) : null}
      {typeof s.index === 'string' && s.index.startsWith('building') ? (
        <span className="nbm-StatusIndex">{trans.__('vector index %1', s.index)}</span>
      ) : null}
      {owner ? <span className="nbm-StatusOwner">{trans.__('owner: %1', owner)}</span> : null}
    </div>
  );
}
