import {
  ILayoutRestorer,
  JupyterFrontEnd,
  JupyterFrontEndPlugin
} from '@jupyterlab/application';
import {
  Clipboard,
  ICommandPalette,
  InputDialog,
  Notification
} from '@jupyterlab/apputils';
import { Cell, ICodeCellModel } from '@jupyterlab/cells';
import { IDocumentManager } from '@jupyterlab/docmanager';
import { INotebookTracker, NotebookActions, NotebookPanel } from '@jupyterlab/notebook';
import { IRenderMimeRegistry } from '@jupyterlab/rendermime';
import { Kernel, KernelMessage } from '@jupyterlab/services';
import { ISettingRegistry } from '@jupyterlab/settingregistry';
import { IStateDB } from '@jupyterlab/statedb';
import { ITranslator, nullTranslator, TranslationBundle } from '@jupyterlab/translation';
import { ReadonlyPartialJSONObject } from '@lumino/coreutils';
import { Poll } from '@lumino/polling';
import { ISignal, Signal } from '@lumino/signaling';

import { IActions } from './components';
import { escapeHtml, escapeInline } from './escape';
import { IDraft, IPanelState, MemoryModel, messageOf } from './model';
import {
  INbMemory,
  INoteSource,
  INotesOptions,
  IRecallOptions,
  IRememberOptions
} from './tokens';
import { IHits, INote, IPage } from './types';
import { MemoryPanel } from './widget';

export { INbMemory } from './tokens';
export type {
  INoteSource,
  IRecallOptions,
  IRememberOptions,
  INotesOptions
} from './tokens';
export { escapeHtml } from './escape';

const PLUGIN_ID = 'nbmemory:plugin';
/** Where the panel keeps its search, filters and tab across reloads. */
const STATE_KEY = 'nbmemory:panel';

export namespace CommandIDs {
  export const open = 'nbmemory:open';
  export const refresh = 'nbmemory:refresh';
  export const newNote = 'nbmemory:new-note';
  export const remember = 'nbmemory:remember';
  export const rememberOutput = 'nbmemory:remember-output';
}

/** What a piece of code run in a kernel for the panel printed, and how it ended. */
export interface IKernelRun {
  ok: boolean;
  /** Its printed and displayed text (text/plain), trimmed. */
  text: string;
  /** `Name: message` of the error it raised, or ''. */
  error: string;
  ename: string;
}

/**
 * Run `code` in a notebook's kernel, for the panel: not stored in the kernel's history
 * (no `In[n]`, the cells' numbering stays), its output kept here and not in the notebook.
 */
export async function runInKernel(
  kernel: Kernel.IKernelConnection,
  code: string
): Promise<IKernelRun> {
  const future = kernel.requestExecute({
    code,
    silent: false,
    store_history: false,
    allow_stdin: false,
    stop_on_error: false
  });
  const texts: string[] = [];
  let error = '';
  let ename = '';
  future.onIOPub = (msg: KernelMessage.IIOPubMessage) => {
    const content = msg.content as any;
    switch (msg.header.msg_type) {
      case 'stream':
        texts.push(String(content.text));
        break;
      case 'display_data':
      case 'execute_result': {
        const plain = content.data?.['text/plain'];
        if (typeof plain === 'string') {
          texts.push(plain + '\n');
        }
        break;
      }
      case 'error':
        ename = String(content.ename);
        error = `${content.ename}: ${content.evalue}`;
        break;
    }
  };
  const reply = await future.done;
  return { ok: reply.content.status === 'ok', text: texts.join('').trim(), error, ename };
}

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
  // IPython reads a line ending in ? as a request for help, not as the magic.
  return `%recall -k 3 ${words.replace(/[\s?]+$/, '')}`;
}

const plugin: JupyterFrontEndPlugin<INbMemory> = {
  id: PLUGIN_ID,
  description: 'Browse, recall, edit and verify what you remembered with nbmemory.',
  autoStart: true,
  requires: [IRenderMimeRegistry],
  optional: [
    ILayoutRestorer,
    ICommandPalette,
    ISettingRegistry,
    INotebookTracker,
    IDocumentManager,
    ITranslator,
    IStateDB
  ],
  provides: INbMemory,
  activate: (
    app: JupyterFrontEnd,
    rendermime: IRenderMimeRegistry,
    restorer: ILayoutRestorer | null,
    palette: ICommandPalette | null,
    settingRegistry: ISettingRegistry | null,
    notebooks: INotebookTracker | null,
    docManager: IDocumentManager | null,
    translator: ITranslator | null,
    state: IStateDB | null
  ): INbMemory => {
    const trans = (translator ?? nullTranslator).load('nbmemory');
    const model = new MemoryModel(trans);

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
     * A kernel's error in words to act on: nbmemory's magics absent is said in full (short:
     * a notification shows about 140 characters), else `failed(why)` words the error.
     */
    function kernelProblem(
      run: IKernelRun,
      path: string,
      failed: (why: string) => string
    ): string {
      // IPython prints a missing magic's UsageError (no error message on iopub).
      const said = `${run.error}\n${run.text}`;
      if (/UsageError: (Line|Cell) magic function .* not found/i.test(said)) {
        return trans.__(
          'nbmemory is not loaded in the kernel of %1: run %load_ext nbmemory there.',
          path
        );
      }
      return failed(run.error || run.text || trans.__('the kernel reported an error'));
    }

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
        model.say(kernelProblem(run, path, failure), 'error');
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

    const panel = new MemoryPanel(model, rendermime, actions);
    app.shell.add(panel, 'left', { rank: 650 });
    restorer?.add(panel, 'nbmemory-panel');

    const openPanel = () => app.shell.activateById(panel.id);

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
      if (code) {
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
      let run: IKernelRun;
      try {
        run = await runInKernel(kernel, `%%remember --output-of ${count}\n${text}`);
      } catch (error) {
        model.say(messageOf(error), 'error');
        return;
      }
      if (!run.ok) {
        model.say(kernelProblem(run, path, why => why), 'error');
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

    app.commands.addCommand(CommandIDs.open, {
      label: trans.__('Open the nbmemory panel'),
      caption: trans.__('Browse, recall, edit and verify what you remembered'),
      execute: openPanel
    });
    app.commands.addCommand(CommandIDs.refresh, {
      label: trans.__('Refresh the nbmemory panel'),
      execute: () => model.refresh({ force: true, status: true })
    });
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
      execute: args => {
        if (!writable()) {
          return refuse();
        }
        const draft = cellDraft(args);
        openPanel();
        model.setView('notes');
        model.startDraft(draft);
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
    for (const command of [CommandIDs.open, CommandIDs.refresh, CommandIDs.newNote]) {
      palette?.addItem({ command, category: 'nbmemory' });
    }

    // -- live updates: a slow poll while the panel is visible (notes written by terminals
    // or other servers, files changing under stale notes) and a check after a cell runs.
    let interval = 10;
    const poll = new Poll({
      auto: false,
      factory: () => model.poll(),
      frequency: { interval: interval * 1000, backoff: true, max: 300 * 1000 },
      name: 'nbmemory:poll',
      standby: () => {
        if (panel.isVisible && interval > 0) {
          return 'when-hidden';
        }
        panel.dirty = true; // skipped a tick: refresh when shown again
        return true;
      }
    });
    let pending: number | undefined;
    NotebookActions.executed.connect(() => {
      if (!panel.isVisible) {
        panel.dirty = true;
        return;
      }
      window.clearTimeout(pending);
      pending = window.setTimeout(() => void model.poll(), 150);
    });
    panel.disposed.connect(() => poll.dispose());

    const schedulePoll = () => {
      const every = Math.max(interval, 1) * 1000;
      poll.frequency = { interval: every, backoff: true, max: Math.max(every, 300 * 1000) };
      void poll.schedule({ interval: every, phase: 'reconnected' });
    };
    const apply = (settings: ISettingRegistry.ISettings, later: boolean) => {
      const size = settings.get('pageSize').composite as number;
      const changed = size !== model.pageSize;
      model.pageSize = size;
      model.recallSize = size; // a recall shows a page too
      interval = settings.get('pollInterval').composite as number;
      schedulePoll();
      if (later && changed && panel.isVisible) {
        void model.refresh();
      }
    };

    model.stateChanged.connect((_, value: IPanelState) => {
      void state?.save(STATE_KEY, value as any).catch(error => {
        console.warn('nbmemory: cannot save the panel state', error);
      });
    });

    void app.restored.then(async () => {
      const [settings, saved] = await Promise.all([
        settingRegistry
          ? settingRegistry.load(PLUGIN_ID).catch(error => {
              console.warn('nbmemory: cannot load settings', error);
              return null;
            })
          : Promise.resolve(null),
        state
          ? state.fetch(STATE_KEY).catch(() => undefined)
          : Promise.resolve(undefined)
      ]);
      model.restore(saved as Partial<IPanelState> | undefined);
      if (settings) {
        apply(settings, false);
        settings.changed.connect(() => apply(settings, true));
      } else {
        schedulePoll();
      }
      model.start();
      if (panel.isVisible) {
        panel.dirty = false;
        void model.refresh();
      }
    });

    // -- the service other extensions get through the INbMemory token.
    return new MemoryService(model, () => {
      openPanel();
      model.setView('notes');
    });
  }
};

/** What other extensions get through the `INbMemory` token: the panel's own calls. */
class MemoryService implements INbMemory {
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
    this._model.startDraft({
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

export default plugin;
