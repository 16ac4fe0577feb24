/**
 * The commands' ids, and the commands that write a note: New note, and Remember… and
 * Remember Output… on a notebook cell (which a reader of a team store does not get).
 */

import { JupyterFrontEnd } from '@jupyterlab/application';
import {
  Clipboard,
  Dialog,
  InputDialog,
  Notification,
  showDialog
} from '@jupyterlab/apputils';
import { Cell, ICodeCellModel } from '@jupyterlab/cells';
import { INotebookTracker, NotebookPanel } from '@jupyterlab/notebook';
import { ReadonlyPartialJSONObject } from '@lumino/coreutils';

import { messageOf } from './describe';
import { IDraft } from './drafts';
import { IKernelRun, kernelProblem, runInKernel } from './kernel';
import { MemoryModel } from './model';
import { INoteSource } from './tokens';

/** A cell's source longer than this is not sent with a note about it: the server refuses
 * a request over 8 MB, and keeps only the first 4,096 characters of the source anyway. */
const MAX_CELL_SOURCE = 1_000_000;

export namespace CommandIDs {
  export const open = 'nbmemory:open';
  export const refresh = 'nbmemory:refresh';
  export const newNote = 'nbmemory:new-note';
  export const remember = 'nbmemory:remember';
  export const rememberOutput = 'nbmemory:remember-output';
}

/** Add the commands that write a note; `openPanel` shows the panel. */
export function addNoteCommands(
  app: JupyterFrontEnd,
  model: MemoryModel,
  notebooks: INotebookTracker | null,
  openPanel: () => void
): void {
  const trans = model.trans;

  /** A new note about the notebook cell the command is for (or the active one). */
  function cellDraft(args: ReadonlyPartialJSONObject): Partial<IDraft> {
    const target = targetCell(args);
    if (!target || app.shell.currentWidget !== target.panel) {
      return {};
    }
    const { panel: current, cell } = target;
    const notebook = current.content;
    const path = current.context.path;
    const source = cell.model.sharedModel.getSource();
    const code = cell.model.type === 'code';
    const count = code ? (cell.model as ICodeCellModel).executionCount : null;
    const provenance: INoteSource = { notebook: path, cell_id: cell.model.id };
    if (code && source.length <= MAX_CELL_SOURCE) {
      provenance.cell_source = source;
      if (count) {
        provenance.execution_count = count;
      }
    }
    const index = notebook.widgets.indexOf(cell) + 1;
    const selected = selectedText(cell, source);
    return {
      text: selected || (cell.model.type === 'markdown' ? source : ''),
      provenance,
      where: count
        ? trans.__('%1, cell [%2]', path, count)
        : trans.__('%1, cell %2', path, index)
    };
  }

  /** The notebook and cell a command is for: the right-clicked cell, or the active one. */
  function targetCell(
    args: ReadonlyPartialJSONObject
  ): { panel: NotebookPanel; cell: Cell } | null {
    const current = notebooks?.currentWidget;
    if (!current) {
      return null;
    }
    const notebook = current.content;
    let cell: Cell | null = notebook.activeCell;
    const hit = args['fromContextMenu']
      ? app.contextMenuHitTest(node => node.classList.contains('jp-Cell'))
      : undefined;
    if (hit) {
      cell = notebook.widgets.find(widget => widget.node === hit) ?? cell;
    }
    return cell ? { panel: current, cell } : null;
  }

  /**
   * Ask for the finding, then run `%%remember --output-of N` in the notebook's kernel,
   * N being the cell's execution count: the kernel keeps the result (`Out[N]`).
   */
  async function rememberOutput(args: ReadonlyPartialJSONObject): Promise<void> {
    const target = targetCell(args);
    if (!target || target.cell.model.type !== 'code') {
      Notification.warning(
        trans.__('Select a code cell that has run: Remember Output keeps its result.')
      );
      return;
    }
    const { panel: current, cell } = target;
    const path = current.context.path;
    const index = current.content.widgets.indexOf(cell) + 1;
    const count = (cell.model as ICodeCellModel).executionCount;
    if (!count) {
      Notification.warning(
        trans.__(
          'Cell %1 of %2 has no execution count (it has not run in this kernel): run it, then Remember Output keeps its result.',
          index,
          path
        ),
        { autoClose: 15000 }
      );
      return;
    }
    const kernel = current.sessionContext.session?.kernel;
    if (!kernel) {
      Notification.warning(
        trans.__(
          "%1 has no running kernel: its result of cell [%2] is in the kernel that ran it. Start the kernel, run the cell again, then Remember Output.",
          path,
          count
        ),
        { autoClose: 15000 }
      );
      return;
    }
    const answer = await InputDialog.getText({
      title: trans.__('Remember the output of cell [%1]', count),
      label: trans.__('What does it show? The note keeps the output as its evidence.'),
      placeholder: trans.__('e.g. orders has 3 rows with a null amount'),
      okLabel: trans.__('Remember'),
      cancelLabel: trans.__('Cancel')
    });
    if (!answer.button.accept) {
      return;
    }
    const text = (answer.value ?? '').trim();
    if (!text) {
      Notification.warning(trans.__('Nothing remembered: the finding was empty.'));
      return;
    }
    // The cell form: the finding is the body, whatever its quotes, dashes or lines.
    // Not written: what was typed is kept on the clipboard, not lost with the dialog.
    const notWritten = (why: string) => {
      Clipboard.copyToSystem(text);
      model.say(`${why} ${trans.__('Your finding is on the clipboard.')}`, 'error');
    };
    let run: IKernelRun;
    try {
      run = await runInKernel(kernel, `%%remember --output-of ${count}\n${text}`);
    } catch (error) {
      notWritten(messageOf(error));
      return;
    }
    if (!run.ok) {
      notWritten(kernelProblem(run, path, why => why, trans));
      return;
    }
    const id = /Remembered #(\d+)/.exec(run.text)?.[1];
    model.say(
      id
        ? trans.__('Remembered #%1 with the output of cell [%2] as its evidence.', id, count)
        : run.text,
      'success'
    );
    await model.refresh({ force: true, status: true });
  }

  // A reader of a team store has no write command in the menus or the palette; a
  // shortcut pressed anyway says why nothing is written.
  const writable = () => !model.readOnly;
  const refuse = () => {
    model.say(model.readOnlyMessage);
  };
  let readOnly = model.readOnly;
  model.changed.connect(() => {
    if (model.readOnly !== readOnly) {
      readOnly = model.readOnly;
      app.commands.notifyCommandChanged();
    }
  });
  app.commands.addCommand(CommandIDs.newNote, {
    label: trans.__('New nbmemory note'),
    caption: trans.__('Write a note in the nbmemory panel'),
    isVisible: writable,
    execute: () => {
      if (!writable()) {
        return refuse();
      }
      openPanel();
      model.setView('notes');
      model.startDraft();
    }
  });
  app.commands.addCommand(CommandIDs.remember, {
    label: args =>
      args['fromContextMenu'] && window.getSelection()?.toString().trim()
        ? trans.__('Remember Selection…')
        : trans.__('Remember…'),
    caption: trans.__(
      'Write an nbmemory note about this cell (its selected text, if any), linked back to it'
    ),
    isVisible: writable,
    execute: async args => {
      if (!writable()) {
        return refuse();
      }
      const draft = cellDraft(args);
      openPanel();
      model.setView('notes');
      await offerDraft(model, draft);
    }
  });
  app.commands.addCommand(CommandIDs.rememberOutput, {
    label: trans.__('Remember Output…'),
    caption: trans.__(
      "Write an nbmemory note that keeps this cell's result as its evidence (%remember --output-of N, run in the notebook's kernel)"
    ),
    isVisible: writable,
    execute: args => (writable() ? rememberOutput(args) : refuse())
  });
}

/** The text selected in a cell: in its editor, or in its rendered Markdown or outputs. */
function selectedText(cell: Cell, source: string): string {
  const selection = window.getSelection();
  const editorNode = cell.editorWidget?.node;
  if (
    selection &&
    !selection.isCollapsed &&
    selection.anchorNode &&
    cell.node.contains(selection.anchorNode) &&
    !editorNode?.contains(selection.anchorNode)
  ) {
    return selection.toString().trim();
  }
  const editor = cell.editor;
  if (editor) {
    const range = editor.getSelection();
    const start = editor.getOffsetAt(range.start);
    const end = editor.getOffsetAt(range.end);
    if (end !== start) {
      return source.slice(Math.min(start, end), Math.max(start, end)).trim();
    }
  }
  return '';
}

/**
 * Open the new-note form with `draft` (a cell's Remember…, another extension's draft()):
 * a note being written there is replaced only if the user says so, else it stays.
 */
export async function offerDraft(model: MemoryModel, draft: Partial<IDraft>): Promise<void> {
  const trans = model.trans;
  if (model.drafting) {
    const answer = await showDialog({
      title: trans.__('Replace the note you are writing?'),
      body: trans.__(
        'The new-note form holds a note you have not remembered yet. Replace it with the new one, or keep writing it.'
      ),
      buttons: [
        Dialog.cancelButton({ label: trans.__('Keep writing') }),
        Dialog.warnButton({ label: trans.__('Replace it') })
      ]
    });
    if (!answer.button.accept) {
      model.startDraft(); // back to the note being written
      return;
    }
  }
  model.cancelDraft();
  model.startDraft(draft);
}
