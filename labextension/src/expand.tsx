import { TranslationBundle } from '@jupyterlab/translation';
import * as React from 'react';

/** Show more / Show less, under a note or a message cut short. */
export function ExpandButton(props: {
  open: boolean;
  onToggle: () => void;
  trans: TranslationBundle;
}): JSX.Element {
  const { open, trans } = props;
  return (
    <button className="nbm-LinkButton nbm-Expand" aria-expanded={open} onClick={props.onToggle}>
      {open ? trans.__('Show less') : trans.__('Show more')}
    </button>
  );
}
