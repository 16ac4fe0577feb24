/**
 * Why a request is slow, as the panel says it: the requests on their way and what each
 * waits for, asking the server (`GET owner`) once one is slow.
 */

import { requestAPI } from './request';
import { IOwnerState } from './types';

/** Why a request is slow, as the panel says it. */
export type Phase = 'starting' | 'loading-model' | 'working' | null;

/** After this long a request asks the server why it is slow (`GET owner`). */
const SLOW_MS = 700;
const OWNER_POLL_MS = 1000;

/** Operations that need the embedding model (the first one after a start loads it). */
export const EMBEDS = new Set(['recall', 'remember', 'supersede', 'edit']);

/** What a slow request waits for, from the server's `owner` answer. */
export function phaseOf(state: IOwnerState): Phase {
  if (state.opening || !state.running || state.state === 'starting') {
    return 'starting';
  }
  if (state.busy && EMBEDS.has(state.busy) && !state.model_loaded) {
    return 'loading-model';
  }
  return 'working';
}

/** The requests on their way, and the phase the panel shows for them (the first of
 * starting, loading the model, working that one of them waits for). */
export class PhaseWatch {
  /** `changed` is called with the new phase whenever it changes. */
  constructor(private _changed: (phase: Phase) => void) {}

  /** A request leaves, waiting for `phase` as far as the panel knows: its token for `end`. */
  begin(phase: Phase): object {
    const token = { timer: 0 };
    this._pending.set(token, phase);
    this._update();
    token.timer = window.setTimeout(() => void this._watchSlow(token), SLOW_MS);
    return token;
  }

  /** The request of `token` is answered (or failed). */
  end(token: object): void {
    window.clearTimeout((token as { timer: number }).timer);
    this._pending.delete(token);
    this._update();
  }

  /** Ask the server what a slow request waits for, until it is answered. */
  private async _watchSlow(token: object): Promise<void> {
    while (this._pending.has(token)) {
      let state: IOwnerState | null = null;
      try {
        state = await requestAPI<IOwnerState>('owner');
      } catch {
        state = null;
      }
      if (!this._pending.has(token)) {
        return;
      }
      this._pending.set(token, state ? phaseOf(state) : 'working');
      this._update();
      await new Promise(resolve => window.setTimeout(resolve, OWNER_POLL_MS));
    }
  }

  private _update(): void {
    const order: Phase[] = ['starting', 'loading-model', 'working'];
    const phases = [...this._pending.values()];
    const phase = order.find(p => phases.includes(p)) ?? null;
    if (phase !== this._phase) {
      this._phase = phase;
      this._changed(phase);
    }
  }

  private _phase: Phase = null;
  private _pending = new Map<object, Phase>();
}
