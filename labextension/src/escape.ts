/**
 * Note text is Markdown, but raw HTML in it must read as text: in the panel and in a
 * Markdown cell the panel inserts, `<img src=x>` shows those characters and `<script>`
 * never vanishes. Both use `escapeHtml`, so an inserted note reads exactly as the card.
 *
 * `&` and `<` are escaped as entities outside code. Inside code (fenced blocks, indented
 * blocks, inline spans) Markdown shows characters literally, so escaping there would show
 * `&lt;`: code is left alone. Autolinks (`<https://...>`) stay links. An image
 * (`![alt](url)`) becomes a link (`[image: alt](url)`), so reading a note fetches nothing.
 */

const FENCE = /^( {0,3})(`{3,}|~{3,})(.*)$/;
const LIST_ITEM = /^( {0,3})([-+*]|\d{1,9}[.)])( {1,4}(?! )|\t| *$)/;
const AUTOLINK = /^<(?:[a-zA-Z][a-zA-Z0-9+.-]{1,31}:[^\s<>]*|[^\s<>@]+@[^\s<>@]+\.[^\s<>@]+)>/;

/** Columns of leading white space (a tab advances to the next multiple of 4). */
function indentOf(line: string): number {
  let columns = 0;
  for (const char of line) {
    if (char === ' ') {
      columns += 1;
    } else if (char === '\t') {
      columns += 4 - (columns % 4);
    } else {
      break;
    }
  }
  return columns;
}

/** Escape `&` and `<` in a paragraph's text, leaving inline code spans as they are. */
export function escapeInline(text: string): string {
  let out = '';
  let i = 0;
  while (i < text.length) {
    const char = text[i];
    if (char === '\\' && i + 1 < text.length) {
      // A backslash escape: keep both characters, but still neutralise `\<` and `\&`.
      const next = text[i + 1];
      out += '\\' + (next === '<' ? '&lt;' : next === '&' ? '&amp;' : next);
      i += 2;
      continue;
    }
    if (char === '`') {
      let run = 1;
      while (text[i + run] === '`') {
        run++;
      }
      const ticks = '`'.repeat(run);
      // The span closes at the next run of exactly as many backticks.
      let close = -1;
      let from = i + run;
      while (from < text.length) {
        const found = text.indexOf(ticks, from);
        if (found < 0) {
          break;
        }
        let end = found + run;
        if (text[end] !== '`') {
          close = found;
          break;
        }
        while (text[end] === '`') {
          end++;
        }
        from = end;
      }
      if (close >= 0) {
        out += text.slice(i, close + run);
        i = close + run;
      } else {
        out += ticks; // no closing run: literal backticks
        i += run;
      }
      continue;
    }
    if (char === '!' && text[i + 1] === '[') {
      // An image becomes a link: showing a note must not fetch a URL its writer chose.
      out += text[i + 2] === ']' ? '[image' : '[image: ';
      i += 2;
      continue;
    }
    if (char === '<') {
      const link = AUTOLINK.exec(text.slice(i));
      if (link) {
        out += link[0];
        i += link[0].length;
        continue;
      }
      out += '&lt;';
    } else if (char === '&') {
      out += '&amp;';
    } else {
      out += char;
    }
    i++;
  }
  return out;
}

/** The note's Markdown with raw HTML turned into text (see the module comment). */
export function escapeHtml(text: string): string {
  const lines = text.replace(/\r\n?/g, '\n').split('\n');
  const out: string[] = [];
  let paragraph: string[] = [];
  let fence: { char: string; length: number } | null = null;
  let previousBlank = true;
  let inParagraph = false;
  let listContent = -1; // content column of the list item we are in, -1 outside lists

  const flush = () => {
    if (paragraph.length) {
      out.push(escapeInline(paragraph.join('\n')));
      paragraph = [];
    }
  };

  for (const line of lines) {
    if (fence) {
      out.push(line);
      const closing = FENCE.exec(line);
      if (
        closing &&
        closing[2][0] === fence.char &&
        closing[2].length >= fence.length &&
        !closing[3].trim()
      ) {
        fence = null;
      }
      continue;
    }
    const opening = FENCE.exec(line);
    if (opening && !(opening[2][0] === '`' && opening[3].includes('`'))) {
      flush();
      fence = { char: opening[2][0], length: opening[2].length };
      out.push(line);
      previousBlank = false;
      inParagraph = false;
      continue;
    }
    if (!line.trim()) {
      flush();
      out.push(line);
      previousBlank = true;
      inParagraph = false;
      continue;
    }
    const indent = indentOf(line);
    const base = listContent >= 0 ? listContent : 0;
    if (indent >= base + 4 && !inParagraph) {
      // An indented code block (inside a list: indented past the item's content).
      flush();
      out.push(line);
      previousBlank = false;
      continue;
    }
    if (listContent >= 0 && indent < listContent && previousBlank && !LIST_ITEM.test(line)) {
      listContent = -1; // a line back at the margin after a blank line ends the list
    }
    const item = LIST_ITEM.exec(line);
    if (item && indent < base + 4) {
      flush();
      const gap = item[3] === '\t' ? 4 - ((item[1].length + item[2].length) % 4) : item[3].length;
      listContent = item[1].length + item[2].length + Math.max(1, gap);
    }
    paragraph.push(line);
    previousBlank = false;
    inParagraph = true;
  }
  flush();
  return out.join('\n');
}
