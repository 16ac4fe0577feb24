/**
 * Where the keyboard's focus goes: arrow keys within a group (tabs, a toolbar), and after
 * an action re-renders the panel or takes a card off it (never left on the page's body).
 */

/** The + (New note) button, as each JupyterLab draws a toolbar button (4.6: a <jp-button>). */
export const NEW_NOTE_BUTTON = 'button.nbm-NewNote, .nbm-NewNote button, jp-button.nbm-NewNote';

/** Where an arrow, Home or End key moves from item ``at`` of ``count`` (wrapping), if anywhere. */
export function arrowTarget(key: string, at: number, count: number): number | undefined {
  return {
    ArrowRight: (at + 1) % count,
    ArrowLeft: (at + count - 1) % count,
    Home: 0,
    End: count - 1
  }[key];
}

/**
 * After `done`, focus the first of `selectors` found in the panel holding `from` (once the
 * view has rendered): a keyboard user goes on from there, not from the page's body.
 */
export function thenFocus(
  from: HTMLElement,
  done: Promise<unknown>,
  ...choices: (string | (() => string))[]
): void {
  const panel = from.closest('.nbm-Panel');
  let selectors: string[] = [];
  const find = (selector: string) => {
    const target = panel?.querySelector<HTMLElement>(selector);
    return target && !(target as HTMLButtonElement).disabled ? target : null;
  };
  // The first choice may take a few frames to render; the others are fallbacks.
  const attempt = (frames: number) => {
    const target =
      find(selectors[0]) ?? (frames > 30 ? selectors.slice(1).map(find).find(Boolean) : null);
    if (target) {
      target.focus();
    } else if (frames < 120) {
      requestAnimationFrame(() => attempt(frames + 1));
    }
  };
  void done.then(() => {
    // A choice may depend on what the action brought (read once it is done).
    selectors = choices.map(choice => (typeof choice === 'string' ? choice : choice()));
    requestAnimationFrame(() => attempt(0));
  });
}

/**
 * Where focus goes once the card holding `button` is gone (its note forgotten): the
 * next card, else the one before, else the search box; not the page's body.
 */
function focusAfterRemoval(button: HTMLElement): () => void {
  const card = button.closest('.nbm-Note');
  const panel = button.closest('.nbm-Panel');
  const neighbour = [card?.nextElementSibling, card?.previousElementSibling].find(
    element => element?.classList.contains('nbm-Note')
  ) as HTMLElement | undefined;
  const id = neighbour?.dataset.noteId;
  return () =>
    requestAnimationFrame(() => {
      const target =
        (id && panel?.querySelector<HTMLElement>(`.nbm-Note[data-note-id="${id}"]`)) ||
        panel?.querySelector<HTMLElement>('.nbm-Note') ||
        panel?.querySelector<HTMLElement>('.nbm-Search');
      target?.focus();
    });
}

/**
 * For an action that may take the card holding `node` off the page (a forget, a verify in
 * a stale list, cancelling the edit of a note that left it): afterwards, if it did and
 * focus fell to the page's body, the next card (or the search box) takes it. The card may
 * leave well after the action: a poll's refresh can overtake the action's own, and a
 * forget that empties the last page loads the page before. Until the card is gone, the
 * panel still shows it, so this watches for up to `frames` frames (about ten seconds).
 */
export function ifCardLeaves(node: HTMLElement | null, frames = 600): () => void {
  if (!node) {
    return () => undefined;
  }
  const refocus = focusAfterRemoval(node);
  const watch = (left: number) => {
    if (node.isConnected) {
      if (left > 0) {
        requestAnimationFrame(() => watch(left - 1));
      }
      return;
    }
    const active = document.activeElement;
    if (!active || active === document.body) {
      refocus();
    }
  };
  return () => requestAnimationFrame(() => watch(frames));
}
