import { IRenderMimeRegistry } from '@jupyterlab/rendermime';
import * as React from 'react';

import { escapeHtml } from './escape';

export { escapeHtml };

/**
 * A note's text rendered as Markdown by JupyterLab's renderer, untrusted (so sanitized),
 * after escaping raw HTML: note text never reaches innerHTML as markup.
 */
export function NoteMarkdown(props: {
  text: string;
  rendermime: IRenderMimeRegistry;
  onRendered?: () => void;
}): JSX.Element {
  const host = React.useRef<HTMLDivElement>(null);
  const rendered = React.useRef(props.onRendered);
  rendered.current = props.onRendered;
  React.useEffect(() => {
    const node = host.current;
    if (!node) {
      return;
    }
    const renderer = props.rendermime.createRenderer('text/markdown');
    const model = props.rendermime.createModel({
      data: { 'text/markdown': escapeHtml(props.text) },
      trusted: false
    });
    let disposed = false;
    // The renderer's node is placed by hand (not Widget.attach): React may remove the
    // host before this effect is cleaned up.
    void renderer.renderModel(model).then(() => {
      if (!disposed) {
        unlinkPaths(renderer.node);
        unanchorHeadings(renderer.node);
        node.appendChild(renderer.node);
        rendered.current?.();
      }
    });
    return () => {
      disposed = true;
      renderer.node.remove();
      renderer.dispose();
    };
  }, [props.text, props.rendermime]);
  // dir="auto": a note in Hebrew or Arabic reads right to left, whatever the page's direction.
  return <div className="nbm-NoteText" dir="auto" ref={host} />;
}

/**
 * A link in a note to a relative path (`[the config](cfg.py)`) names a file where the note
 * was written, which the panel cannot know: it opened the server's root or a new workspace.
 * It is shown as text, the path in its tooltip; links to web pages stay links.
 */
function unlinkPaths(root: HTMLElement): void {
  for (const link of Array.from(root.querySelectorAll('a'))) {
    const href = link.getAttribute('href') ?? '';
    if (!/^[a-z][a-z0-9+.-]*:/i.test(href) && !href.startsWith('#')) {
      const text = document.createElement('span');
      text.className = 'nbm-PathLink';
      text.textContent = link.textContent;
      text.title = href;
      link.replaceWith(text);
    }
  }
}

/**
 * A heading in a note is not a place in JupyterLab's page: its ¶ link set the Lab's URL to
 * `/lab#Heading`, and two notes with one heading gave the page two elements of one id.
 */
function unanchorHeadings(root: HTMLElement): void {
  root.querySelectorAll('a.jp-InternalAnchorLink').forEach(link => link.remove());
  root
    .querySelectorAll('h1[id], h2[id], h3[id], h4[id], h5[id], h6[id]')
    .forEach(heading => heading.removeAttribute('id'));
}
