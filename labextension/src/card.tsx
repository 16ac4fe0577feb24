/**
 * A note's card: its header, tags, text (or the editor while it is edited), what it is
 * about, details and actions.
 */

import { IRenderMimeRegistry } from '@jupyterlab/rendermime';
import { TranslationBundle } from '@jupyterlab/translation';
import {
  checkIcon,
  copyIcon,
  deleteIcon,
  editIcon,
  markdownIcon,
  refreshIcon
} from '@jupyterlab/ui-components';
import * as React from 'react';

import { aboutList, describeStale } from './describe';
import { CheckLine, EarlierVersions, Provenance } from './details';
import { clashes } from './drafts';
import { NoteEditor, conflictOf } from './editor';
import { ExpandButton } from './expand';
import { tagList } from './filters';
import { ifCardLeaves } from './focus';
import { kindLabel, priorityLabel } from './labels';
import { NoteMarkdown } from './markdown';
import { IPanelProps } from './props';
import { ActionButton, Toolbar } from './toolbar';
import { IAnchor, INote } from './types';

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
        <ExpandButton open={open} onToggle={() => setOpen(!open)} trans={trans} />
      ) : null}
    </div>
  );
}

/**
 * What a note is about (its files, data, variables...), muted under its text, so that what
 * it depends on shows before it goes stale. A long list shows its first items; the
 * title holds them all.
 */
function AboutLine(props: {
  note: INote;
  skip: (anchor: IAnchor) => boolean;
  trans: TranslationBundle;
}): JSX.Element | null {
  const { trans } = props;
  const { shown, more, all } = aboutList(props.note.anchors, trans, props.skip);
  if (!shown.length) {
    return null;
  }
  const items = more ? [...shown, trans.__('+%1 more', more)] : shown;
  return (
    <div className="nbm-About" title={more ? all.join(', ') : undefined}>
      {trans.__('About: %1', items.join(', '))}
    </div>
  );
}

export function NoteCard(
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
                dir="auto"
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
                  'This note is no longer on this page: a write elsewhere moved, forgot or replaced it. Save or cancel your edit here (saving says if it cannot be edited now).'
                )
              : note.version !== edit.base.version
                ? clashes(edit, note).length
                  ? trans.__(
                      'Changed elsewhere while you edit it (now version %1), in what you changed too: saving shows you their version first.',
                      note.version
                    )
                  : trans.__(
                      'Changed elsewhere while you edit it (now version %1): saving writes only the fields you changed, over that version.',
                      note.version
                    )
                : undefined
          }
          conflict={edit.conflict ? conflictOf(edit.conflict, trans) : undefined}
          saveLabel={trans.__('Save as new version')}
          onChange={draft => model.updateEdit(note.id, draft)}
          failed={edit.failure}
          onCancel={() => {
            const after = ifCardLeaves(card.current);
            // Keep theirs (or cancel on a clash): show their version now, not at the next poll.
            const theirs = edit.conflict !== undefined;
            model.endEdit(note.id);
            after();
            if (theirs) {
              void model.refresh({ force: true });
            }
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
      <AboutLine
        note={note}
        // Its check has a line of its own below (with when it last held): said once.
        skip={a => a.kind === 'check' && a.target === check?.expression}
        trans={trans}
      />
      {showVersions ? <EarlierVersions model={model} note={note} rendermime={props.rendermime} /> : null}
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
                  const after = ifCardLeaves(event.currentTarget);
                  void model.forget(note.id).then(after);
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
