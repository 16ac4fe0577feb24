import { IRenderMimeRegistry } from '@jupyterlab/rendermime';
import * as React from 'react';

/**
 * Escape `&` and `<` outside code spans and fences, so that HTML in a note is shown as
 * text while Markdown (emphasis, lists, links, code) still renders.
 */
export function escapeHtmlOutsideCode(text: string): string {
  return text
    .split(/(```[\s\S]*?```|~~~[\s\S]*?~~~|`[^`\n]*`)/g)
    .map((part, index) =>
      index % 2 === 1 ? part : part.replace(/&/g, '&amp;').replace(/</g, '&lt;')
    )
    .join('');
}

/**
 * A note's text rendered as Markdown by JupyterLab's renderer, untrusted (so sanitized),
 * after escaping raw HTML: note text never reaches innerHTML as markup.
 */
export function NoteMarkdown(props: {
  text: string;
  rendermime: IRenderMimeRegistry;
}): JSX.Element {
  const host = React.useRef<HTMLDivElement>(null);
  React.useEffect(() => {
    const node = host.current;
    if (!node) {
      return;
    }
    const renderer = props.rendermime.createRenderer('text/markdown');
    const model = props.rendermime.createModel({
      data: { 'text/markdown': escapeHtmlOutsideCode(props.text) },
      trusted: false
    });
    let disposed = false;
    // The renderer's node is placed by hand (not Widget.attach): React may remove the
    // host before this effect is cleaned up.
    void renderer.renderModel(model).then(() => {
      if (!disposed) {
        node.appendChild(renderer.node);
      }
    });
    return () => {
      disposed = true;
      renderer.node.remove();
      renderer.dispose();
    };
  }, [props.text, props.rendermime]);
  return <div className="nbm-NoteText" ref={host} />;
}
