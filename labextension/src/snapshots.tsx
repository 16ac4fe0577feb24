/**
 * The Snapshots tab: the sealed snapshots, and the diff between two of them (or one and
 * now), grouped by kind of change.
 */

import { IRenderMimeRegistry } from '@jupyterlab/rendermime';
import { TranslationBundle } from '@jupyterlab/translation';
import * as React from 'react';

import { age, describeStale } from './describe';
import { ExpandButton } from './expand';
import { changeLabel } from './labels';
import { NoteMarkdown } from './markdown';
import { MemoryModel } from './model';
import { PhaseAndError } from './status';
import { ISnapshot, ISnapshotDiff } from './types';

/** Characters of a snapshot's message shown before "Show more". */
const MESSAGE_SHOWN = 160;

/** A message cut at MESSAGE_SHOWN characters, with Show more / Show less. */
function ShortText(props: { text: string; trans: TranslationBundle }): JSX.Element {
  const [open, setOpen] = React.useState(false);
  const { text, trans } = props;
  if (text.length <= MESSAGE_SHOWN) {
    return <>{text}</>;
  }
  return (
    <>
      {open ? text : text.slice(0, MESSAGE_SHOWN).trimEnd() + '…'}{' '}
      <ExpandButton open={open} onToggle={() => setOpen(!open)} trans={trans} />
    </>
  );
}

/** A choice among the snapshots by name, or ``none`` (the empty value). */
function SnapshotSelect(props: {
  className: string;
  label: string;
  none: string;
  names: string[];
  value: string;
  onChange: (name: string) => void;
}): JSX.Element {
  return (
    <span className="nbm-Select">
      <select
        className={props.className}
        aria-label={props.label}
        value={props.value}
        onChange={event => props.onChange(event.target.value)}
      >
        <option value="">{props.none}</option>
        {props.names.map(n => (
          <option key={n} value={n}>
            {n}
          </option>
        ))}
      </select>
    </span>
  );
}

export function SnapshotsView(props: {
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
      <PhaseAndError model={model} />
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
                <td className="nbm-SnapshotMessage">
                  <ShortText text={s.message} trans={trans} />
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      {model.snapshots.length ? (
        <div className="nbm-DiffControls">
          <SnapshotSelect
            className="nbm-DiffFrom"
            label={trans.__('Compare from')}
            none={trans.__('from…')}
            names={names}
            value={from}
            onChange={setFrom}
          />
          <SnapshotSelect
            className="nbm-DiffTo"
            label={trans.__('Compare to')}
            none={trans.__('now')}
            names={names}
            value={to}
            onChange={setTo}
          />
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
      <div className="nbm-SrOnly" role="status">
        {model.diff ? diffSaid(model.diff, trans) : ''}
      </div>
      {model.diff ? (
        <DiffView diff={model.diff} trans={trans} rendermime={props.rendermime} />
      ) : null}
    </div>
  );
}

/** The order of change kinds in a snapshot diff (the server's, `models.CHANGES`). */
const CHANGE_ORDER = [
  'added',
  'edited',
  'superseded',
  'revoked',
  'refuted',
  'reinstated',
  'purged',
  'became_stale',
  'stale_anew',
  'no_longer_stale'
];

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

/** A comparison in one sentence, for a screen reader: "before → now: added (1), …". */
function diffSaid(diff: ISnapshotDiff, trans: TranslationBundle): string {
  const counts = new Map<string, number>();
  for (const change of diff.changes) {
    counts.set(change.change, (counts.get(change.change) ?? 0) + 1);
  }
  const parts = [...counts].map(([kind, n]) => `${changeLabel(kind, trans)} (${n})`);
  return `${diff.a} → ${diff.b}: ${
    parts.length ? parts.join(', ') : trans.__('No changes between these snapshots.')
  }`;
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
      <div className="nbm-DiffHeading" role="heading" aria-level={3}>
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
          <div className="nbm-DiffTitle" role="heading" aria-level={4}>
            {title}
          </div>
          {list}
        </>
      )}
    </div>
  );
}
