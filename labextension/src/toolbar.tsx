/**
 * A card's buttons: one action button, and a row of them as a single stop of the Tab key.
 */

import { LabIcon } from '@jupyterlab/ui-components';
import * as React from 'react';

import { arrowTarget } from './focus';

export function ActionButton(props: {
  className: string;
  icon: LabIcon;
  label: string;
  title?: string;
  /** The note it acts on, for screen readers ("Edit #12"). */
  noteId?: number;
  disabled?: boolean;
  onClick: (event: React.MouseEvent<HTMLButtonElement>) => void;
}): JSX.Element {
  return (
    <button
      className={`jp-Button jp-mod-minimal nbm-Action ${props.className}`}
      title={props.title ?? props.label}
      aria-label={props.noteId === undefined ? undefined : `${props.label} #${props.noteId}`}
      disabled={props.disabled}
      onClick={props.onClick}
    >
      <props.icon.react tag="span" className="nbm-ActionIcon" elementSize="small" />
      <span className="nbm-ActionLabel">{props.label}</span>
    </button>
  );
}

/**
 * A card's actions as one stop of the Tab key (a WAI-ARIA toolbar): the arrows, Home and
 * End move between its buttons, and Tab comes back to the one last used, so a list of
 * cards is not five stops a card.
 */
export function Toolbar(props: {
  label: string;
  children: React.ReactNode;
  className?: string;
}): JSX.Element {
  const bar = React.useRef<HTMLDivElement>(null);
  const current = React.useRef(0);
  const buttons = () => [...(bar.current?.querySelectorAll<HTMLButtonElement>(':scope > button') ?? [])];
  const rove = () => {
    const all = buttons();
    if (!all[current.current] || all[current.current].disabled) {
      current.current = Math.max(0, all.findIndex(button => !button.disabled));
    }
    all.forEach((button, i) => (button.tabIndex = i === current.current ? 0 : -1));
  };
  React.useLayoutEffect(rove);
  return (
    <div
      ref={bar}
      className={props.className ?? 'nbm-Actions'}
      role="toolbar"
      aria-label={props.label}
      onFocus={event => {
        const at = buttons().findIndex(button => button === (event.target as Element));
        if (at >= 0) {
          current.current = at;
          rove();
        }
      }}
      onKeyDown={event => {
        const all = buttons().filter(button => !button.disabled);
        const at = all.findIndex(button => button === (event.target as Element));
        const to = arrowTarget(event.key, at, all.length);
        if (to !== undefined && all.length) {
          event.preventDefault();
          all[to].focus();
        }
      }}
    >
      {props.children}
    </div>
  );
}
