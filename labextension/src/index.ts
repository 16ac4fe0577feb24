/**
 * The JupyterLab plugin: the panel in the left sidebar, its commands, its live updates
 * and saved state, and the INbMemory service for other extensions.
 */

import {
  ILabStatus,
  ILayoutRestorer,
  JupyterFrontEnd,
  JupyterFrontEndPlugin
} from '@jupyterlab/application';
import { ICommandPalette } from '@jupyterlab/apputils';
import { IDocumentManager } from '@jupyterlab/docmanager';
import { INotebookTracker, NotebookActions } from '@jupyterlab/notebook';
import { IRenderMimeRegistry } from '@jupyterlab/rendermime';
import { ISettingRegistry } from '@jupyterlab/settingregistry';
import { IStateDB } from '@jupyterlab/statedb';
import { ITranslator, nullTranslator } from '@jupyterlab/translation';
import { Poll } from '@lumino/polling';

import { labActions } from './actions';
import { addNoteCommands, CommandIDs } from './commands';
import { MemoryModel } from './model';
import { MemoryService } from './service';
import { IPanelState } from './state';
import { INbMemory } from './tokens';
import { MemoryPanel } from './widget';

export { INbMemory } from './tokens';
export type {
  INoteSource,
  IRecallOptions,
  IRememberOptions,
  INotesOptions
} from './tokens';
export { escapeHtml } from './escape';
export { CommandIDs } from './commands';
export type { IKernelRun } from './kernel';
export { runInKernel } from './kernel';
export { noteAsMarkdown, recallSnippet } from './actions';

const PLUGIN_ID = 'nbmemory:plugin';
/** Where the panel keeps its search, filters and tab across reloads. */
const STATE_KEY = 'nbmemory:panel';

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
    IStateDB,
    ILabStatus
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
    state: IStateDB | null,
    labStatus: ILabStatus | null
  ): INbMemory => {
    const trans = (translator ?? nullTranslator).load('nbmemory');
    const model = new MemoryModel(trans);

    const actions = labActions(model, notebooks, docManager);

    const panel = new MemoryPanel(model, rendermime, actions);
    app.shell.add(panel, 'left', { rank: 650 });
    restorer?.add(panel, 'nbmemory-panel');

    const openPanel = () => app.shell.activateById(panel.id);

    // While the panel holds unsaved typing, closing or reloading the page asks first, as
    // it does for a notebook with unsaved changes.
    let unsaved: { dispose(): void } | null = null;
    model.unsavedChanged.connect((_, holding) => {
      unsaved?.dispose();
      unsaved = holding && labStatus ? labStatus.setDirty() : null;
    });

    app.commands.addCommand(CommandIDs.open, {
      label: trans.__('Open the nbmemory panel'),
      caption: trans.__('Browse, recall, edit and verify what you remembered'),
      execute: openPanel
    });
    app.commands.addCommand(CommandIDs.refresh, {
      label: trans.__('Refresh the nbmemory panel'),
      execute: () => model.refresh({ force: true, status: true })
    });
    addNoteCommands(app, model, notebooks, openPanel);
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

export default plugin;
