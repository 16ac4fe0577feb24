import {
  ILayoutRestorer,
  JupyterFrontEnd,
  JupyterFrontEndPlugin
} from '@jupyterlab/application';
import { Clipboard, ICommandPalette } from '@jupyterlab/apputils';
import { IDocumentManager } from '@jupyterlab/docmanager';
import {
  INotebookTracker,
  NotebookActions,
  NotebookPanel
} from '@jupyterlab/notebook';
import { IRenderMimeRegistry } from '@jupyterlab/rendermime';
import { ISettingRegistry } from '@jupyterlab/settingregistry';
import { Poll } from '@lumino/polling';

import { IActions } from './components';
import { MemoryModel } from './model';
import { INote } from './types';
import { MemoryPanel } from './widget';

const PLUGIN_ID = 'nbmemory:plugin';

namespace CommandIDs {
  export const open = 'nbmemory:open';
  export const refresh = 'nbmemory:refresh';
}

/** The Markdown cell a note becomes when inserted into a notebook. */
export function noteAsMarkdown(note: INote): string {
  const tags = note.tags.length ? `; ${note.tags.join(', ')}` : '';
  return `**nbmemory #${note.id}** (${note.kind}, ${note.priority}${tags})\n\n${note.text}`;
}

/** A `%recall` line that finds this note again. */
export function recallSnippet(note: INote): string {
  const words = note.text.replace(/\s+/g, ' ').trim().split(' ').slice(0, 12).join(' ');
  return `%recall -k 3 ${words}`;
}

const plugin: JupyterFrontEndPlugin<void> = {
  id: PLUGIN_ID,
  description: 'Browse, recall, edit and verify what you remembered with nbmemory.',
  autoStart: true,
  requires: [IRenderMimeRegistry],
  optional: [
    ILayoutRestorer,
    ICommandPalette,
    ISettingRegistry,
    INotebookTracker,
    IDocumentManager
  ],
  activate: (
    app: JupyterFrontEnd,
    rendermime: IRenderMimeRegistry,
    restorer: ILayoutRestorer | null,
    palette: ICommandPalette | null,
    settingRegistry: ISettingRegistry | null,
    notebooks: INotebookTracker | null,
    docManager: IDocumentManager | null
  ) => {
    const model = new MemoryModel();

    const actions: IActions = {
      openSource: note => void openSource(note),
      insert: note => {
        const current = notebooks?.currentWidget;
        if (!current) {
          model.say('Open a notebook first: the note is inserted into the active notebook.', 'error');
          return;
        }
        const notebook = current.content;
        NotebookActions.insertBelow(notebook);
        NotebookActions.changeCellType(notebook, 'markdown');
        const cell = notebook.activeCell;
        if (cell) {
          cell.model.sharedModel.setSource(noteAsMarkdown(note));
          void NotebookActions.run(notebook, current.sessionContext);
        }
        model.say(`Inserted #${note.id} into ${current.context.path}.`);
      },
      copyRecall: note => {
        Clipboard.copyToSystem(recallSnippet(note));
        model.say(`Copied: ${recallSnippet(note)}`);
      }
    };

    async function openSource(note: INote): Promise<void> {
      if (!note.lab_path || !docManager) {
        return;
      }
      const widget = docManager.openOrReveal(note.lab_path);
      if (!(widget instanceof NotebookPanel)) {
        return;
      }
      await widget.context.ready;
      await widget.revealed;
      const cellId = note.provenance.cell_id;
      const notebook = widget.content;
      const index = notebook.widgets.findIndex(cell => cell.model.id === cellId);
      if (index < 0) {
        model.say(
          cellId
            ? `The cell this note came from is no longer in ${note.lab_path}.`
            : `${note.lab_path} opened; the note does not record its cell.`
        );
        return;
      }
      notebook.activeCellIndex = index;
      notebook.mode = 'command';
      await notebook.scrollToItem(index, 'center');
    }

    const panel = new MemoryPanel(model, rendermime, actions);
    app.shell.add(panel, 'left', { rank: 650 });
    restorer?.add(panel, 'nbmemory-panel');

    app.commands.addCommand(CommandIDs.open, {
      label: 'Open the nbmemory panel',
      caption: 'Browse, recall, edit and verify what you remembered',
      execute: () => {
        app.shell.activateById(panel.id);
      }
    });
    app.commands.addCommand(CommandIDs.refresh, {
      label: 'Refresh the nbmemory panel',
      execute: () => model.refresh()
    });
    palette?.addItem({ command: CommandIDs.open, category: 'nbmemory' });
    palette?.addItem({ command: CommandIDs.refresh, category: 'nbmemory' });

    // Live updates: a slow poll while the panel is visible (notes written by terminals or
    // other servers) and an immediate check after any cell of this JupyterLab finishes.
    let interval = 10;
    const poll = new Poll({
      auto: false,
      factory: () => model.poll(),
      frequency: { interval: interval * 1000, backoff: true, max: 300 * 1000 },
      name: 'nbmemory:poll',
      standby: () => (panel.isVisible && interval > 0 ? 'when-hidden' : true)
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

    const apply = (settings: ISettingRegistry.ISettings) => {
      model.pageSize = settings.get('pageSize').composite as number;
      interval = settings.get('pollInterval').composite as number;
      void poll.schedule({
        interval: Math.max(interval, 1) * 1000,
        phase: 'reconnected'
      });
      if (panel.isVisible) {
        void model.refresh();
      }
    };
    void app.restored.then(async () => {
      await model.checkVersion();
      if (settingRegistry) {
        try {
          const settings = await settingRegistry.load(PLUGIN_ID);
          settings.changed.connect(apply);
          apply(settings);
        } catch (error) {
          console.warn('nbmemory: cannot load settings', error);
        }
      }
      void poll.start();
    });
  }
};

export default plugin;
