import { IRenderMimeRegistry } from '@jupyterlab/rendermime';
import * as React from 'react';

import { NoteMarkdown } from './markdown';
import { MemoryModel, age, describeStale } from './model';
import { IHit, INote, ISnapshot, ISnapshotDiff, KINDS, PRIORITIES } from './types';

/** What the panel asks the application to do (open files, touch notebooks, clipboard). */
export interface IActions {
  openSource(note: INote): void;
  insert(note: INote): void;
  copyRecall(note: INote): void;
}

interface IPanelProps {
  model: MemoryModel;
  rendermime: IRenderMimeRegistry;
  actions: IActions;
}

export function MemoryPanelView(props: IPanelProps): JSX.Element {
  const { model } = props;
  return (
    <div className="nbm-Panel">
      <div className="nbm-Header">
        <span className="nbm-Title">nbmemory</span>
        <div className="nbm-Tabs" role="tablist">
          {(['notes', 'snapshots'] as const).map(view => (
            <button
              key={view}
              role="tab"
              aria-selected={model.view === view}
              className={`nbm-Tab${model.view === view ? ' nbm-mod-active' : ''}`}
              onClick={() => model.setView(view)}
            >
              {view === 'notes' ? 'Notes' : 'Snapshots'}
            </button>
          ))}
        </div>
        <button
          className="nbm-Button nbm-Refresh"
          title="Refresh"
          onClick={() => void model.refresh()}
        >
          ⟳
        </button>
      </div>
      {model.compatibility && !model.compatibility.ok ? (
        <div className="nbm-Banner nbm-mod-error" role="alert">
          {model.compatibility.message}
        </div>
      ) : null}
      <Notice model={model} />
      {model.view === 'notes' ? (
        <NotesView {...props} />
      ) : (
        <SnapshotsView model={model} />
      )}
      <StatusLine model={model} />
    </div>
  );
}

function Notice(props: { model: MemoryModel }): JSX.Element | null {
  const { model } = props;
  const notice = model.notice;
  if (!notice) {
    return null;
  }
  return (
    <div className={`nbm-Notice nbm-mod-${notice.kind}`} role="status">
      <span className="nbm-NoticeText">{notice.message}</span>
      {notice.kind === 'undo' && notice.noteId !== undefined ? (
        <button
          className="nbm-Button nbm-Undo"
          onClick={() => void model.undoForget(notice.noteId!)}
        >
          Undo
        </button>
      ) : null}
      <button
        className="nbm-Button nbm-Dismiss"
        title="Dismiss"
        onClick={() => model.dismissNotice()}
      >
        ×
      </button>
    </div>
  );
}

function SearchBox(props: { model: MemoryModel }): JSX.Element {
  const { model } = props;
  const [value, setValue] = React.useState(model.query);
  const timer = React.useRef<number>();
  const submit = (text: string) => {
    window.clearTimeout(timer.current);
    model.setQuery(text);
  };
  return (
    <input
      className="nbm-Search jp-mod-styled"
      type="search"
      placeholder="Recall: ask in any words…"
      aria-label="Recall"
      value={value}
      onChange={event => {
        const text = event.target.value;
        setValue(text);
        window.clearTimeout(timer.current);
        timer.current = window.setTimeout(() => submit(text), 400);
      }}
      onKeyDown={event => {
        if (event.key === 'Enter') {
          submit(value);
        }
      }}
    />
  );
}

function Filters(props: { model: MemoryModel }): JSX.Element {
  const { model } = props;
  const { filters } = model;
  const [tags, setTags] = React.useState(filters.tags);
  return (
    <div className="nbm-Filters">
      <input
        className="nbm-TagFilter jp-mod-styled"
        placeholder="tags"
        aria-label="Filter by tags"
        value={tags}
        onChange={event => setTags(event.target.value)}
        onBlur={() => model.setFilters({ tags })}
        onKeyDown={event => {
          if (event.key === 'Enter') {
            model.setFilters({ tags });
          }
        }}
      />
      <select
        className="nbm-KindFilter jp-mod-styled"
        aria-label="Filter by kind"
        value={filters.kind}
        onChange={event => model.setFilters({ kind: event.target.value })}
      >
        <option value="">any kind</option>
        {KINDS.map(kind => (
          <option key={kind} value={kind}>
            {kind}
          </option>
        ))}
      </select>
      <select
        className="nbm-PriorityFilter jp-mod-styled"
        aria-label="Filter by priority"
        value={filters.priority}
        onChange={event => model.setFilters({ priority: event.target.value })}
      >
        <option value="">any priority</option>
        {PRIORITIES.map(priority => (
          <option key={priority} value={priority}>
            {priority}
          </option>
        ))}
      </select>
      <select
        className="nbm-StaleFilter jp-mod-styled"
        aria-label="Filter by staleness"
        value={filters.stale}
        onChange={event =>
          model.setFilters({ stale: event.target.value as '' | 'stale' | 'fresh' })
        }
      >
        <option value="">stale or fresh</option>
        <option value="stale">stale only</option>
        <option value="fresh">fresh only</option>
      </select>
    </div>
  );
}

function NotesView(props: IPanelProps): JSX.Element {
  const { model } = props;
  const searching = model.hits !== null;
  const items: { note: INote; score?: number }[] = searching
    ? model.hits!.map((hit: IHit) => ({ note: hit.note, score: hit.score }))
    : model.notes.map(note => ({ note }));
  return (
    <>
      <div className="nbm-Controls">
        <SearchBox model={model} />
        <Filters model={model} />
      </div>
      <div className="nbm-Summary">
        {model.loading ? 'Loading… ' : ''}
        {searching
          ? `${items.length} recalled for “${model.query.trim()}”`
          : `${model.total} note${model.total === 1 ? '' : 's'}`}
        {searching && model.filteredOut
          ? ` (${model.filteredOut} more below the score threshold)`
          : ''}
      </div>
      <ul className="nbm-NoteList">
        {items.map(item => (
          <NoteCard
            key={`${item.note.id}:${item.note.version}`}
            note={item.note}
            score={item.score}
            {...props}
          />
        ))}
      </ul>
      {searching && model.previously.length ? (
        <div className="nbm-Previously">
          {model.previously.map(hit => (
            <div key={hit.note.id}>
              Previously believed (#{hit.note.id}, {hit.note.status}): {hit.note.text}
            </div>
          ))}
        </div>
      ) : null}
      {!searching && model.total > model.pageSize ? <Pager model={model} /> : null}
      {!model.loading && items.length === 0 && model.compatibility?.ok ? (
        <div className="nbm-Empty">
          {searching
            ? 'Nothing recalled. Try other words or clear the filters.'
            : 'No notes yet. In a notebook: %load_ext nbmemory, then %remember what you found.'}
        </div>
      ) : null}
    </>
  );
}

function Pager(props: { model: MemoryModel }): JSX.Element {
  const { model } = props;
  const last = Math.min(model.offset + model.pageSize, model.total);
  return (
    <div className="nbm-Pager">
      <button
        className="nbm-Button"
        disabled={model.offset === 0}
        onClick={() => model.setPage(model.offset - model.pageSize)}
      >
        ‹ Newer
      </button>
      <span>
        {model.offset + 1}–{last} of {model.total}
      </span>
      <button
        className="nbm-Button"
        disabled={last >= model.total}
        onClick={() => model.setPage(model.offset + model.pageSize)}
      >
        Older ›
      </button>
    </div>
  );
}

function NoteCard(
  props: IPanelProps & { note: INote; score?: number }
): JSX.Element {
  const { note, model, actions } = props;
  const [editing, setEditing] = React.useState(false);
  const stale = note.stale.length > 0;
  return (
    <li
      className={`nbm-Note nbm-mod-${note.priority}${stale ? ' nbm-mod-stale' : ''}`}
      data-note-id={note.id}
    >
      <div className="nbm-NoteHeader">
        <span className="nbm-NoteId">#{note.id}</span>
        <span className={`nbm-Badge nbm-Priority nbm-mod-${note.priority}`}>
          {note.priority}
        </span>
        <span className="nbm-Badge nbm-Kind">{note.kind}</span>
        <span className="nbm-Age" title={note.created_at ?? ''}>
          {age(note.created_at)}
        </span>
        {note.version > 1 ? (
          <span className="nbm-Version" title="version">
            v{note.version}
          </span>
        ) : null}
        {props.score !== undefined ? (
          <span className="nbm-Score" title="recall score">
            {props.score.toFixed(2)}
          </span>
        ) : null}
        {stale ? (
          <span
            className="nbm-Badge nbm-StaleBadge"
            title={note.stale.map(describeStale).join('; ')}
          >
            stale
          </span>
        ) : null}
      </div>
      {note.tags.length ? (
        <div className="nbm-Tags">
          {note.tags.map(tag => (
            <button
              key={tag}
              className="nbm-Tag"
              title={`Show notes tagged ${tag}`}
              onClick={() => model.setFilters({ tags: tag })}
            >
              {tag}
            </button>
          ))}
        </div>
      ) : null}
      {stale ? (
        <div className="nbm-StaleReason">
          Stale: {note.stale.map(describeStale).join('; ')}
        </div>
      ) : null}
      {editing ? (
        <NoteEditor
          note={note}
          onCancel={() => setEditing(false)}
          onSave={async fields => {
            if (await model.edit(note.id, fields)) {
              setEditing(false);
            }
          }}
        />
      ) : (
        <NoteMarkdown text={note.text} rendermime={props.rendermime} />
      )}
      <Provenance note={note} actions={actions} />
      {editing ? null : (
        <div className="nbm-Actions">
          <button className="nbm-Button nbm-Edit" onClick={() => setEditing(true)}>
            Edit
          </button>
          <button className="nbm-Button nbm-Verify" onClick={() => void model.verify(note.id)}>
            Verify
          </button>
          <button className="nbm-Button nbm-Forget" onClick={() => void model.forget(note.id)}>
            Forget
          </button>
          <button
            className="nbm-Button nbm-Copy"
            title="Copy a %recall line for this note"
            onClick={() => actions.copyRecall(note)}
          >
            Copy %recall
          </button>
          <button
            className="nbm-Button nbm-Insert"
            title="Insert into the active notebook as a Markdown cell"
            onClick={() => actions.insert(note)}
          >
            Insert
          </button>
        </div>
      )}
    </li>
  );
}

function Provenance(props: { note: INote; actions: IActions }): JSX.Element {
  const { note, actions } = props;
  const p = note.provenance;
  let where = '';
  if (p.notebook) {
    where = note.lab_path ?? p.notebook;
    if (p.execution_count !== undefined && p.execution_count !== null) {
      where += ` [${p.execution_count}]`;
    }
  } else {
    where = p.source ? `not from a notebook (${p.source})` : 'not from a notebook';
  }
  const git = p.git_commit
    ? ` @ ${p.git_branch ?? '?'}:${String(p.git_commit).slice(0, 8)}${p.git_dirty ? ' (dirty)' : ''}`
    : '';
  return (
    <div className="nbm-Provenance">
      {note.lab_path ? (
        <a
          href="#"
          className="nbm-SourceLink"
          title={p.cell_id ? `Open ${note.lab_path} at the cell` : `Open ${note.lab_path}`}
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
      {note.author ? ` · ${note.author}` : ''}
    </div>
  );
}

function NoteEditor(props: {
  note: INote;
  onSave: (fields: { text?: string; priority?: string; tags?: string[] }) => Promise<void>;
  onCancel: () => void;
}): JSX.Element {
  const { note } = props;
  const [text, setText] = React.useState(note.text);
  const [priority, setPriority] = React.useState(note.priority);
  const [tags, setTags] = React.useState(note.tags.join(', '));
  const save = () => {
    const fields: { text?: string; priority?: string; tags?: string[] } = {};
    if (text !== note.text) {
      fields.text = text;
    }
    if (priority !== note.priority) {
      fields.priority = priority;
    }
    const tagList = tags
      .split(',')
      .map(t => t.trim())
      .filter(t => t);
    if (tagList.join(',') !== note.tags.join(',')) {
      fields.tags = tagList;
    }
    if (Object.keys(fields).length === 0) {
      props.onCancel();
      return;
    }
    void props.onSave(fields);
  };
  return (
    <div className="nbm-Editor">
      <textarea
        className="nbm-EditText jp-mod-styled"
        aria-label="Note text"
        value={text}
        rows={Math.min(12, Math.max(3, text.split('\n').length + 1))}
        onChange={event => setText(event.target.value)}
        onKeyDown={event => {
          if (event.key === 'Enter' && (event.ctrlKey || event.metaKey)) {
            save();
          }
        }}
      />
      <div className="nbm-EditFields">
        <select
          className="nbm-EditPriority jp-mod-styled"
          aria-label="Priority"
          value={priority}
          onChange={event => setPriority(event.target.value)}
        >
          {PRIORITIES.map(p => (
            <option key={p} value={p}>
              {p}
            </option>
          ))}
        </select>
        <input
          className="nbm-EditTags jp-mod-styled"
          aria-label="Tags"
          placeholder="tags, comma-separated"
          value={tags}
          onChange={event => setTags(event.target.value)}
        />
      </div>
      <div className="nbm-Actions">
        <button className="nbm-Button nbm-Save jp-mod-accept" onClick={save}>
          Save as new version
        </button>
        <button className="nbm-Button nbm-Cancel" onClick={props.onCancel}>
          Cancel
        </button>
      </div>
    </div>
  );
}

function SnapshotsView(props: { model: MemoryModel }): JSX.Element {
  const { model } = props;
  const [from, setFrom] = React.useState('');
  const [to, setTo] = React.useState('');
  const names = model.snapshots.map(s => s.name);
  return (
    <div className="nbm-Snapshots">
      {model.snapshots.length === 0 ? (
        <div className="nbm-Empty">
          No snapshots yet. Seal one in a notebook with %snapshot NAME -m 'why'.
        </div>
      ) : (
        <table className="nbm-SnapshotTable">
          <thead>
            <tr>
              <th>name</th>
              <th>sealed</th>
              <th>notes</th>
              <th>message</th>
            </tr>
          </thead>
          <tbody>
            {model.snapshots.map((s: ISnapshot) => (
              <tr key={s.name}>
                <td>{s.name}</td>
                <td title={s.at}>{age(s.at)} ago</td>
                <td>{s.note_count}</td>
                <td>{s.message}</td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      {model.snapshots.length ? (
        <div className="nbm-DiffControls">
          <select
            className="nbm-DiffFrom jp-mod-styled"
            aria-label="Compare from"
            value={from}
            onChange={event => setFrom(event.target.value)}
          >
            <option value="">from…</option>
            {names.map(n => (
              <option key={n} value={n}>
                {n}
              </option>
            ))}
          </select>
          <select
            className="nbm-DiffTo jp-mod-styled"
            aria-label="Compare to"
            value={to}
            onChange={event => setTo(event.target.value)}
          >
            <option value="">now</option>
            {names.map(n => (
              <option key={n} value={n}>
                {n}
              </option>
            ))}
          </select>
          <button
            className="nbm-Button nbm-Compare"
            disabled={!from}
            onClick={() => void model.diffSnapshots(from, to)}
          >
            Compare
          </button>
        </div>
      ) : null}
      {model.diff ? <DiffView diff={model.diff} names={model.diffNames} /> : null}
    </div>
  );
}

/** The order and wording of change kinds in a snapshot diff. */
const CHANGE_ORDER = [
  'added',
  'edited',
  'superseded',
  'revoked',
  'reinstated',
  'purged',
  'became_stale',
  'no_longer_stale'
];

function DiffView(props: { diff: ISnapshotDiff; names: [string, string] | null }): JSX.Element {
  const { diff } = props;
  const groups = new Map<string, ISnapshotDiff['changes']>();
  for (const change of diff.changes) {
    groups.set(change.change, [...(groups.get(change.change) ?? []), change]);
  }
  const kinds = [...groups.keys()].sort(
    (a, b) => (CHANGE_ORDER.indexOf(a) + 99) % 99 - (CHANGE_ORDER.indexOf(b) + 99) % 99
  );
  return (
    <div className="nbm-Diff">
      <div className="nbm-DiffHeading">
        {diff.a} → {diff.b}
      </div>
      {diff.changes.length === 0 ? (
        <div className="nbm-Empty">No changes between these snapshots.</div>
      ) : null}
      {kinds.map(kind => (
        <div key={kind} className={`nbm-DiffSection nbm-mod-${kind}`}>
          <div className="nbm-DiffTitle">
            {kind.replace(/_/g, ' ')} ({groups.get(kind)!.length})
          </div>
          <ul>
            {groups.get(kind)!.map(change => (
              <li key={change.note.id}>
                <span className="nbm-NoteId">#{change.note.id}</span> {change.note.text}
                {change.detail ? <span className="nbm-DiffDetail"> ({change.detail})</span> : null}
              </li>
            ))}
          </ul>
        </div>
      ))}
    </div>
  );
}

function StatusLine(props: { model: MemoryModel }): JSX.Element {
  const { model } = props;
  if (model.statusError) {
    return (
      <div className="nbm-Status nbm-mod-error" title={model.statusError}>
        {model.statusError}
      </div>
    );
  }
  const s = model.status;
  if (!s) {
    return <div className="nbm-Status">…</div>;
  }
  const owner = s.owner ? `${s.owner}${s.pid ? ` (pid ${s.pid})` : ''}` : '';
  return (
    <div className="nbm-Status" title={`${s.store}${s.store_reason ? ` (${s.store_reason})` : ''}`}>
      <span className="nbm-StatusStore">{s.store}</span>
      <span className="nbm-StatusCount">
        {s.notes} note{s.notes === 1 ? '' : 's'}
      </span>
      <span className="nbm-StatusModel">{s.model}</span>
      {owner ? <span className="nbm-StatusOwner">owner: {owner}</span> : null}
    </div>
  );
}
