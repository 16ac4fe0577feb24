/**
 * What the panel asks of JupyterLab (IActions): open a note's notebook at its cell,
 * insert a note into the active notebook, copy its %recall line, re-check it in a kernel.
 */

import { Clipboard, Notification } from '@jupyterlab/apputils';
import { IDocumentManager } from '@jupyterlab/docmanager';
import { INotebookTracker, NotebookActions, NotebookPanel } from '@jupyterlab/notebook';
import { nullTranslator, TranslationBundle } from '@jupyterlab/translation';

import { messageOf } from './describe';
import { escapeHtml, escapeInline } from './escape';
import { IKernelRun, kernelProblem, runInKernel } from './kernel';
import { MemoryModel } from './model';
import { IActions } from './props';
import { INote } from './types';

/**
 * The Markdown cell a note becomes when inserted into a notebook: it reads exactly as
 * the panel shows the note (raw HTML as text, code as code).
 */
export function noteAsMarkdown(note: INote, trans?: TranslationBundle): string {
  const t = trans ?? nullTranslator.load('nbmemory');
  const tags = note.tags.length ? `; ${note.tags.join(', ')}` : '';
  const header = escapeInline(`${note.kind}, ${note.priority}${tags}`);
  return `**${t.__('nbmemory #%1', note.id)}** (${header})\n\n${escapeHtml(note.text)}`;
}

/** A `%recall` line that finds this note again. */
export function recallSnippet(note: INote): string {
  const words = note.text.replace(/\s+/g, ' ').trim().split(' ').slice(0, 12).join(' ');
  // IPython reads a line ending in ? as a request for help, not as the magic; a word that
  // starts with a dash ("--about is how...", "with --kind gotcha") would be read as an option.
  const dashed = words.split(' ').some(word => word.startsWith('-'));
  return `%recall -k 3 ${dashed ? '-- ' : ''}${words.replace(/[\s?]+$/, '')}`;
}

/** The panel's actions on this JupyterLab's notebooks (those it has, if any). */
export function labActions(
  model: MemoryModel,
  notebooks: INotebookTracker | null,
  docManager: IDocumentManager | null
): IActions {
  const trans = model.trans;
  const actions: IActions = {
    openSource: note => void openSource(note),
    insert: note => {
      const current = notebooks?.currentWidget;
      if (!current) {
        model.say(
          trans.__('Open a notebook first: the note is inserted into the active notebook.')
        );
        return;
      }
      const notebook = current.content;
      NotebookActions.insertBelow(notebook);
      NotebookActions.changeCellType(notebook, 'markdown');
      const cell = notebook.activeCell;
      if (cell) {
        cell.model.sharedModel.setSource(noteAsMarkdown(note, trans));
        void NotebookActions.run(notebook, current.sessionContext);
      }
      model.say(trans.__('Inserted #%1 into %2.', note.id, current.context.path), 'success');
    },
    copyRecall: note => {
      Clipboard.copyToSystem(recallSnippet(note));
      model.say(trans.__('Copied: %1', recallSnippet(note)));
    },
    recheck: note => recheck(note)
  };

  /**
   * Run a note's check in the active notebook's kernel (`%memory check ID`): the data a
   * check reads lives there, and the panel never evaluates code in the server.
   */
  async function recheck(note: INote): Promise<void> {
    const check = model.checks.get(note.id);
    const names = check?.names.length ? check.names.join(', ') : trans.__('its data');
    const current = notebooks?.currentWidget;
    if (!current) {
      Notification.warning(
        trans.__(
          "Open the notebook whose data the check of #%1 reads (%2) and run it: Re-check runs the check in the active notebook's kernel.",
          note.id,
          names
        ),
        { autoClose: 15000 }
      );
      return;
    }
    const path = current.context.path;
    const kernel = current.sessionContext.session?.kernel;
    if (!kernel) {
      Notification.warning(
        trans.__(
          '%1 has no running kernel: start it and run the cells that define %2, then Re-check #%3.',
          path,
          names,
          note.id
        ),
        { autoClose: 15000 }
      );
      return;
    }
    const failure = (why: string) =>
      trans.__('Re-check of #%1 in %2 failed: %3', note.id, path, why);
    const failed = (why: string) => model.say(failure(why), 'error');
    let run: IKernelRun;
    try {
      run = await runInKernel(kernel, `%memory check ${note.id}`);
    } catch (error) {
      failed(messageOf(error));
      return;
    }
    if (!run.ok) {
      model.say(kernelProblem(run, path, failure, trans), 'error');
      return;
    }
    await model.refresh({ force: true, status: true });
    const status = model.checks.get(note.id)?.last?.status;
    const message = trans.__('Re-checked #%1 in %2: %3', note.id, path, run.text);
    Notification.emit(message, status === 'passed' ? 'success' : 'warning', {
      autoClose: 8000
    });
  }

  /** Open a notebook with the note's cell active, or say why it cannot be. */
  async function openAt(path: string, cellId: string | undefined): Promise<void> {
    if (!docManager) {
      return;
    }
    const widget = docManager.openOrReveal(path);
    if (!(widget instanceof NotebookPanel)) {
      return;
    }
    await widget.context.ready;
    await widget.revealed;
    const notebook = widget.content;
    const index = notebook.widgets.findIndex(cell => cell.model.id === cellId);
    if (index < 0) {
      model.say(
        cellId
          ? trans.__('The cell this note came from is no longer in %1.', path)
          : trans.__('%1 opened; the note does not record its cell.', path)
      );
      return;
    }
    notebook.activeCellIndex = index;
    notebook.mode = 'command';
    await notebook.scrollToItem(index, 'center');
  }

  async function openSource(note: INote): Promise<void> {
    if (!note.lab_path) {
      return;
    }
    const cellId = note.provenance.cell_id;
    let where;
    try {
      where = await model.source(note.id);
    } catch (error) {
      model.fail(error);
      return;
    }
    if (where.exists) {
      await openAt(note.lab_path, cellId);
      return;
    }
    // Renamed, moved or deleted: never open a missing file (a 404 dialog and a ghost tab).
    if (where.moved_to.length) {
      const target = where.moved_to[0];
      Notification.warning(
        trans.__('%1 is no longer there. Its cell is now in %2.', note.lab_path, target),
        {
          autoClose: false,
          actions: [
            {
              label: trans.__('Open %1', target),
              displayType: 'accent',
              callback: () => void openAt(target, cellId)
            }
          ]
        }
      );
    } else {
      Notification.warning(
        trans.__(
          '%1 is no longer there (renamed, moved or deleted), and no notebook here holds its cell.',
          note.lab_path
        ),
        { autoClose: 15000 }
      );
    }
  }

  return actions;
}
