/**
 * A note as the editor holds it: a draft (new note or new version), an edit and the
 * version it was opened at, and which fields an edit changes.
 */

import { tagList } from './filters';
import { INoteSource } from './tokens';
import { INote } from './types';

/** A note being written in the panel's "New note" form. */
export interface IDraft {
  text: string;
  kind: string;
  priority: string;
  tags: string;
  provenance?: INoteSource;
  /** Where it comes from, as the form shows it ("analysis.ipynb, cell [4]"). */
  where?: string;
}

/** A note being edited: the version it was opened at, and what the editor holds now. */
export interface IEdit {
  base: INote;
  draft: IDraft;
  /** Set when a save found the fields it changes changed elsewhere too: the note now. */
  conflict?: { note: INote; fields: string[] };
  /** Why the last save was not written (the form says it, beside the notice). */
  failure?: string;
}

/** The fields an edit writes: those it changes. */
export type EditFields = { text?: string; priority?: string; kind?: string; tags?: string[] };

/** A field of a note as an edit compares and shows it (a list joined by `separator`). */
export function fieldOf(note: INote, name: string, separator = ','): string {
  const value = (note as unknown as Record<string, unknown>)[name];
  return Array.isArray(value) ? value.join(separator) : String(value);
}

/** A new note's form, filled in with what is given. */
export function newDraft(draft: Partial<IDraft> = {}): IDraft {
  return {
    text: draft.text ?? '',
    kind: draft.kind ?? 'finding',
    priority: draft.priority ?? 'medium',
    tags: draft.tags ?? '',
    provenance: draft.provenance,
    where: draft.where
  };
}

/** The editor's fields for a note as it is. */
export function draftOf(note: INote): IDraft {
  return {
    text: note.text,
    kind: note.kind,
    priority: note.priority,
    tags: note.tags.join(', ')
  };
}

/** The fields an edit changes that `now` (the note as written since) changed too. */
export function clashes(edit: IEdit, now: INote): string[] {
  return Object.keys(changedFields(edit.base, edit.draft)).filter(
    name => fieldOf(now, name) !== fieldOf(edit.base, name)
  );
}

/** The fields `draft` changes in `base` (only those are written). */
export function changedFields(base: INote, draft: IDraft): EditFields {
  const fields: EditFields = {};
  if (draft.text !== base.text) {
    fields.text = draft.text;
  }
  if (draft.priority !== base.priority) {
    fields.priority = draft.priority;
  }
  if (draft.kind !== base.kind) {
    fields.kind = draft.kind;
  }
  const tags = tagList(draft.tags);
  if (tags.join(',') !== base.tags.join(',')) {
    fields.tags = tags;
  }
  return fields;
}
