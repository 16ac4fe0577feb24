/**
 * What a card says of its note besides the text: its earlier versions, its check, and
 * where it came from (notebook, cell, commit, author, age).
 */

import { IRenderMimeRegistry } from '@jupyterlab/rendermime';
import { TranslationBundle } from '@jupyterlab/translation';
import * as React from 'react';

import { age } from './describe';
import { kindLabel, priorityLabel } from './labels';
import { NoteMarkdown } from './markdown';
import { MemoryModel } from './model';
import { IActions } from './props';
import { ICheck, INote } from './types';

/**
 * What a note said before each edit, newest first, read when opened (and when it changes),
 * rendered as the note is.
 */
export function EarlierVersions(props: {
  model: MemoryModel;
  note: INote;
  rendermime: IRenderMimeRegistry;
}): JSX.Element {
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
          <div className="nbm-VersionText">
            <NoteMarkdown text={v.text} rendermime={props.rendermime} />
          </div>
        </li>
      ))}
    </ol>
  );
}

/**
 * A note's check: its code, and when it last held or failed, with the value then. All of
 * it is text (React escapes it): an expression or a value is never markup.
 */
export function CheckLine(props: { check: ICheck; note: INote; trans: TranslationBundle }): JSX.Element {
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

export function Provenance(props: {
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
