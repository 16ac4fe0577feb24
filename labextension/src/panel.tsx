/**
 * The panel's frame: the tabs (Notes, Snapshots) with their keys, the New note and
 * Refresh buttons, the banners, the current tab, and the status line.
 */

import { addIcon, refreshIcon, ToolbarButtonComponent } from '@jupyterlab/ui-components';
import * as React from 'react';

import { NEW_NOTE_BUTTON, arrowTarget } from './focus';
import { MemoryModel } from './model';
import { NotesView } from './notes';
import { IPanelProps } from './props';
import { SnapshotsView } from './snapshots';
import { StatusLine, TeamStoreLine } from './status';

export function MemoryPanelView(props: IPanelProps): JSX.Element {
  const { model } = props;
  const trans = model.trans;
  const panel = React.useRef<HTMLDivElement>(null);
  const drafting = React.useRef(false);
  React.useEffect(() => {
    // The new-note form closed (saved or cancelled) with focus in it: back to its + button.
    const active = document.activeElement;
    if (drafting.current && !model.draft && (!active || active === document.body)) {
      // JupyterLab 4.6 draws the button inside a <jp-button>, which passes focus on.
      panel.current?.querySelector<HTMLElement>(NEW_NOTE_BUTTON)?.focus();
    }
    drafting.current = !!model.draft;
  }, [model.draft]);
  return (
    <div className="nbm-Panel" ref={panel}>
      <div className="nbm-Header">
        <div
          className="nbm-Tabs"
          role="tablist"
          aria-label={trans.__('nbmemory views')}
          onKeyDown={event => moveBetweenTabs(event, model)}
        >
          {VIEWS.map(view => (
            <button
              key={view}
              id={`nbm-tab-${view}`}
              role="tab"
              aria-selected={model.view === view}
              aria-controls={model.view === view ? `nbm-tabpanel-${view}` : undefined}
              tabIndex={model.view === view ? 0 : -1}
              className={`nbm-Tab${model.view === view ? ' nbm-mod-active' : ''}`}
              onClick={() => model.setView(view)}
            >
              {view === 'notes' ? trans.__('Notes') : trans.__('Snapshots')}
            </button>
          ))}
        </div>
        {model.readOnly ? null : (
          <ToolbarButtonComponent
            className="nbm-NewNote"
            icon={addIcon}
            tooltip={trans.__('New note')}
            enabled={!!model.compatibility?.ok}
            noFocusOnClick={false}
            onClick={() => {
              model.setView('notes');
              model.startDraft();
            }}
          />
        )}
        <ToolbarButtonComponent
          className="nbm-Refresh"
          icon={refreshIcon}
          tooltip={trans.__('Refresh')}
          noFocusOnClick={false}
          onClick={() => void model.refresh({ force: true, status: true })}
        />
      </div>
      {model.teamStore ? <TeamStoreLine model={model} address={model.teamStore} /> : null}
      {model.compatibility && !model.compatibility.ok ? (
        <div className="nbm-Banner nbm-mod-error" role="alert">
          {model.compatibility.message}
        </div>
      ) : null}
      {model.readOnly ? (
        <div className="nbm-Banner nbm-ReadOnly" role="status">
          {model.readOnlyMessage}
        </div>
      ) : null}
      <div
        className="nbm-TabPanel"
        role="tabpanel"
        id={`nbm-tabpanel-${model.view}`}
        aria-labelledby={`nbm-tab-${model.view}`}
      >
        {model.view === 'notes' ? (
          <NotesView {...props} />
        ) : (
          <SnapshotsView model={model} rendermime={props.rendermime} />
        )}
      </div>
      <StatusLine model={model} />
    </div>
  );
}

const VIEWS = ['notes', 'snapshots'] as const;

/** The tabs' keys (WAI-ARIA tabs): arrows, Home and End select and focus a tab. */
function moveBetweenTabs(event: React.KeyboardEvent, model: MemoryModel): void {
  const to = arrowTarget(event.key, VIEWS.indexOf(model.view), VIEWS.length);
  if (to === undefined) {
    return;
  }
  event.preventDefault();
  model.setView(VIEWS[to]);
  const list = event.currentTarget as HTMLElement;
  requestAnimationFrame(() => list.querySelector<HTMLElement>(`#nbm-tab-${VIEWS[to]}`)?.focus());
}
