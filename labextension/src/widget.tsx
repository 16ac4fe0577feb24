import { IRenderMimeRegistry } from '@jupyterlab/rendermime';
import { ReactWidget, UseSignal } from '@jupyterlab/ui-components';
import { Message } from '@lumino/messaging';
import * as React from 'react';

import { memoryIcon } from './icons';
import { MemoryModel } from './model';
import { MemoryPanelView } from './panel';
import { IActions } from './props';

/** The left side panel: a React view over the model, refreshed when shown. */
export class MemoryPanel extends ReactWidget {
  constructor(
    readonly model: MemoryModel,
    private _rendermime: IRenderMimeRegistry,
    private _actions: IActions
  ) {
    super();
    this.id = 'nbmemory-panel';
    this.addClass('nbm-Widget');
    this.title.icon = memoryIcon;
    this.title.caption = model.trans.__('nbmemory: what you remembered');
  }

  /** Set while hidden when something may have changed (a cell ran, a poll was skipped):
   * refresh, status line included, when shown again. */
  dirty = true;

  /** Opened from the palette or a shortcut: focus comes into the panel (its search box),
   * not left behind in the launcher; a form being written keeps it. */
  protected onActivateRequest(msg: Message): void {
    super.onActivateRequest(msg);
    requestAnimationFrame(() => {
      if (!this.node.contains(document.activeElement)) {
        const target =
          this.node.querySelector<HTMLElement>('.nbm-Editor textarea') ??
          this.node.querySelector<HTMLElement>('.nbm-Search');
        target?.focus();
      }
    });
  }

  protected onAfterShow(msg: Message): void {
    super.onAfterShow(msg);
    if (this.dirty) {
      this.dirty = false;
      void this.model.refresh({ status: true });
    }
  }

  render(): JSX.Element {
    return (
      <UseSignal signal={this.model.changed}>
        {() => (
          <MemoryPanelView
            model={this.model}
            rendermime={this._rendermime}
            actions={this._actions}
          />
        )}
      </UseSignal>
    );
  }
}
