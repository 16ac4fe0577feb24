/**
 * The form that writes a note (a new one, or a new version of one) and what it says when
 * a save finds the same fields changed elsewhere.
 */

import { TranslationBundle } from '@jupyterlab/translation';
import * as React from 'react';

import { IDraft, fieldOf } from './drafts';
import { tagList } from './filters';
import { NEW_NOTE_BUTTON, thenFocus } from './focus';
import { kindLabel, priorityLabel } from './labels';
import { MemoryModel } from './model';
import { INote, KINDS, PRIORITIES } from './types';

/** Past this many characters the editor suggests splitting the note. */
const LONG_NOTE = 2000;

/** What the editor says when a save found its fields changed elsewhere too. */
export function conflictOf(
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
export function NoteEditor(props: {
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
  /** Why the last save was not written. */
  failed?: string;
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
  const tagsBox = React.useRef<HTMLInputElement>(null);
  const saveOver = React.useRef<HTMLButtonElement>(null);
  const focusedClash = React.useRef<string | null>(null);
  const pristine = props.pristine ?? initial;
  const clash = props.conflict?.message ?? null;
  React.useEffect(() => {
    // The save that found the clash disabled the button that had focus (the page's body
    // took it): the choice between the two versions takes it, once per clash.
    if (clash !== null && !saving && focusedClash.current !== clash) {
      focusedClash.current = clash;
      saveOver.current?.focus();
    } else if (clash === null) {
      focusedClash.current = null;
    }
  }, [clash, saving]);
  const dirty =
    !!props.failed || // not saved: what the form holds is all there is of it
    text.trim() !== pristine.text.trim() ||
    kind !== pristine.kind ||
    priority !== pristine.priority ||
    tags !== pristine.tags;
  React.useEffect(() => {
    props.onChange?.({ ...initial, text, kind, priority, tags });
    setDiscarding(false);
  }, [text, kind, priority, tags]);
  // Typing not yet saved keeps the page from closing or reloading without a warning.
  const self = React.useRef({});
  React.useEffect(() => {
    model.setUnsaved(self.current, dirty);
  }, [dirty]);
  React.useEffect(() => () => model.setUnsaved(self.current, false), []);
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
    // Said in the form, beside the tags (the server's refusal was only a passing toast).
    const spaced = tagList(tags).find(tag => /\s/.test(tag));
    if (spaced) {
      setProblem(
        trans.__(
          'Tag “%1” contains a space: a tag is one word (join its words with - or _); separate tags with commas.',
          spaced
        )
      );
      tagsBox.current?.focus();
      return;
    }
    setProblem(null);
    setSaving(true);
    const draft = { ...initial, text, kind, priority, tags };
    void (over && props.onSaveOver ? props.onSaveOver(draft) : props.onSave(draft)).finally(
      () => {
        setSaving(false);
        // Not saved (refused, or the server away): the button that had focus was disabled
        // meanwhile and the page's body took it; the text goes on being edited.
        requestAnimationFrame(() => {
          const active = document.activeElement;
          if (area.current?.isConnected && (!active || active === document.body)) {
            area.current.focus();
          }
        });
      }
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
              ref={saveOver}
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
        dir="auto"
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
      ) : props.failed ? (
        <div className="nbm-EditProblem" role="alert">
          {props.failed}
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
          ref={tagsBox}
          className="nbm-EditTags jp-mod-styled"
          aria-label={trans.__('Tags')}
          placeholder={trans.__('tags, comma-separated')}
          value={tags}
          onChange={event => {
            setTags(event.target.value);
            if (problem) {
              setProblem(null);
            }
          }}
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

export function NewNote(props: { model: MemoryModel; draft: IDraft }): JSX.Element {
  const { model, draft } = props;
  const trans = model.trans;
  // A new draft (another Remember…) replaces the form's content; the same one (+ again)
  // focuses it.
  const [generation, setGeneration] = React.useState(0);
  const form = React.useRef<HTMLDivElement>(null);
  React.useEffect(() => {
    const started = (_: MemoryModel, replaced: boolean) => {
      if (replaced) {
        setGeneration(g => g + 1);
      } else {  // after the click that asked for it (its button takes the focus first)
        requestAnimationFrame(() =>
          form.current?.querySelector<HTMLElement>('.nbm-EditText')?.focus()
        );
      }
    };
    model.draftStarted.connect(started);
    return () => {
      model.draftStarted.disconnect(started);
    };
  }, [model]);
  return (
    <div className="nbm-NewNote-Form" role="form" aria-label={trans.__('New note')} ref={form}>
      <div className="nbm-FormTitle">{trans.__('New note')}</div>
      <NoteEditor
        key={generation}
        model={model}
        initial={draft}
        pristine={model.draftStart ?? undefined}
        onChange={next => model.updateDraft(next)}
        failed={model.draftFailure ?? undefined}
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
              NEW_NOTE_BUTTON,
              '.nbm-Search'
            );
          }
          await done;
        }}
      />
    </div>
  );
}
