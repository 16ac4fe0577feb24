/**
 * The panel's notices (JupyterLab's notifications): passing ones, the Undo of a forget,
 * and error ones that stay until closed or until they no longer hold.
 */

import { Notification } from '@jupyterlab/apputils';

/** How long the Undo of a forget stays offered. */
export const UNDO_MS = 10000;
const INFO_MS = 5000;

export class Notices {
  /** How many error notices were said: `close(seq)` closes those said up to it. */
  get seq(): number {
    return this._seq;
  }

  say(message: string, kind: 'info' | 'success' | 'error' = 'info'): void {
    if (kind === 'error') {
      this.error(message, false);
    } else {
      Notification.emit(message, kind, { autoClose: INFO_MS });
    }
  }

  /** A passing notice with an Undo button, offered for `UNDO_MS`; its id. */
  offerUndo(message: string, label: string, caption: string, undo: () => void): string {
    return Notification.info(message, {
      autoClose: UNDO_MS,
      actions: [{ label, caption, displayType: 'accent', callback: undo }]
    });
  }

  /** Take back a notice that no longer holds (an Undo done another way). */
  dismiss(id: string): void {
    Notification.dismiss(id);
  }

  /**
   * An error notice stays until closed, or until it no longer holds: one about a passing
   * condition (no server, the store held elsewhere) closes once a later request is
   * answered; any other once a later action succeeds.
   */
  error(message: string, transient: boolean): void {
    const id = Notification.error(message, { autoClose: false });
    this._errors.set(id, { transient, seq: ++this._seq });
  }

  /** Close the error notices said up to `seq` (all of them, or the passing ones only). */
  close(seq: number, transientOnly: boolean): void {
    for (const [id, toast] of [...this._errors]) {
      if (toast.seq <= seq && (toast.transient || !transientOnly)) {
        this._errors.delete(id);
        Notification.dismiss(id);
      }
    }
  }

  /** The panel's own error notices still shown, by notification id. */
  private _errors = new Map<string, { transient: boolean; seq: number }>();
  private _seq = 0;
}
