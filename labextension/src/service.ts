/**
 * The INbMemory service other extensions get: the panel's own calls, and its new-note form.
 */

import { ISignal, Signal } from '@lumino/signaling';

import { offerDraft } from './commands';
import { MemoryModel } from './model';
import { INbMemory, INotesOptions, IRecallOptions, IRememberOptions } from './tokens';
import { IHits, INote, IPage } from './types';

/** What other extensions get through the `INbMemory` token: the panel's own calls. */
export class MemoryService implements INbMemory {
  constructor(
    private _model: MemoryModel,
    private _show: () => void
  ) {
    _model.noteWritten.connect(() => this._changed.emit());
  }

  get changed(): ISignal<INbMemory, void> {
    return this._changed;
  }

  recall(query: string, options?: IRecallOptions): Promise<IHits> {
    return this._model.recallNotes(query, options);
  }

  remember(text: string, options?: IRememberOptions): Promise<INote> {
    return this._model.remember(text, options);
  }

  notes(options?: INotesOptions): Promise<IPage> {
    return this._model.listNotes(options);
  }

  draft(text: string, options: IRememberOptions = {}): void {
    this._show();
    void offerDraft(this._model, {
      text,
      kind: options.kind,
      priority: options.priority,
      tags: Array.isArray(options.tags) ? options.tags.join(', ') : options.tags,
      provenance: options.provenance,
      where: options.provenance?.notebook
    });
  }

  private _changed = new Signal<INbMemory, void>(this);
}
