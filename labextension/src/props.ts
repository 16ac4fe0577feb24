/**
 * What the views are given: the model, JupyterLab's Markdown renderer, and the actions
 * the panel asks of the application.
 */

import { IRenderMimeRegistry } from '@jupyterlab/rendermime';

import { MemoryModel } from './model';
import { INote } from './types';

/** What the panel asks the application to do (open files, touch notebooks, clipboard). */
export interface IActions {
  openSource(note: INote): void;
  insert(note: INote): void;
  copyRecall(note: INote): void;
  /** Run the note's check in the active notebook's kernel (`%memory check ID`). */
  recheck(note: INote): Promise<void>;
}

export interface IPanelProps {
  model: MemoryModel;
  rendermime: IRenderMimeRegistry;
  actions: IActions;
}
