/**
 * The panel's status lines: the team store under the tabs, why a request is slow, and the
 * memory service's status at the bottom.
 */

import * as React from 'react';

import { redactAddress, teamStoreWhere } from './address';
import { MemoryModel } from './model';

/** Under the tabs, for a team store: where it is (never who connects or a password). */
export function TeamStoreLine(props: { model: MemoryModel; address: string }): JSX.Element {
  const { model, address } = props;
  const trans = model.trans;
  return (
    <div className="nbm-TeamStore" title={redactAddress(address)}>
      <span className="nbm-TeamStoreWhere">
        {trans.__('Team store · %1', teamStoreWhere(address))}
      </span>
      {model.readOnly ? (
        <span className="nbm-Badge nbm-ReadOnlyBadge">{trans.__('read-only')}</span>
      ) : null}
    </div>
  );
}

function PhaseLine(props: { model: MemoryModel }): JSX.Element | null {
  const { model } = props;
  const trans = model.trans;
  if (!model.phase) {
    return null;
  }
  const text = {
    starting: trans.__('Starting the memory service…'),
    'loading-model': trans.__(
      'Loading the model (the first recall after a start takes a few seconds)…'
    ),
    working: trans.__('Waiting for the memory service…')
  }[model.phase];
  return (
    <div className="nbm-Phase" role="status" data-phase={model.phase}>
      <span className="nbm-Spinner" aria-hidden="true" />
      {text}
    </div>
  );
}

/** What the service is doing now, and what went wrong, above a tab's content. */
export function PhaseAndError(props: { model: MemoryModel }): JSX.Element {
  const { model } = props;
  return (
    <>
      <PhaseLine model={model} />
      {model.error ? (
        <div className="nbm-Banner nbm-mod-error" role="alert">
          {model.error}
        </div>
      ) : null}
    </>
  );
}

export function StatusLine(props: { model: MemoryModel }): JSX.Element {
  const { model } = props;
  const trans = model.trans;
  if (model.statusError) {
    // The banner above says it already when the listing failed the same way.
    const same = model.statusError === model.error;
    return (
      <div className="nbm-Status nbm-mod-error" title={model.statusError}>
        {model.statusUnreachable
          ? // Jupyter's server did not answer: the memory service is not the one to blame.
            same
            ? trans.__("JupyterLab's server: not responding (see above)")
            : model.statusError
          : same
            ? trans.__('memory service: unavailable (see above)')
            : model.statusError}
      </div>
    );
  }
  const s = model.status;
  if (!s) {
    return <div className="nbm-Status">…</div>;
  }
  const store = redactAddress(s.store);
  const where = `${store}${s.store_reason ? ` (${s.store_reason})` : ''}`;
  if (!s.running) {
    return (
      <div className="nbm-Status" title={where}>
        <span className="nbm-StatusStore">{store}</span>
        <span className="nbm-StatusOwner">
          {trans.__('memory service: not running (it starts on the next request)')}
        </span>
      </div>
    );
  }
  const pid = s.owner_pid ?? s.pid;
  const owner = s.owner ? `${s.owner}${pid ? ` (pid ${pid})` : ''}` : '';
  return (
    <div className="nbm-Status" title={where}>
      <span className="nbm-StatusStore">{store}</span>
      <span className="nbm-StatusCount">{trans._n('%1 note', '%1 notes', s.notes ?? 0)}</span>
      {s.stale ? (
        <span className="nbm-StatusStale">{trans._n('%1 stale', '%1 stale', s.stale)}</span>
      ) : null}
      <span className="nbm-StatusModel">{s.model}</span>
      {s.model_loading ? (
        <span className="nbm-StatusLoading">
          {trans.__('loading the model: keyword results meanwhile')}
        </span>
      ) : null}
      {typeof s.index === 'string' && s.index.startsWith('building') ? (
        <span className="nbm-StatusIndex">{trans.__('vector index %1', s.index)}</span>
      ) : null}
      {owner ? <span className="nbm-StatusOwner">{trans.__('owner: %1', owner)}</span> : null}
    </div>
  );
}
