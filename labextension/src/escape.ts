/**
 * Note text is Markdown, but raw HTML in it must read as text: in the panel and in a
 * Markdown cell the panel inserts, `<img src=x>` shows those characters and `<script>`
 * never vanishes. Both use `escapeHtml`, so an inserted note reads exactly as the card.
 *
 * `&` and `<` are escaped as entities outside code. Inside code (fenced blocks, indented
 * blocks, inline spans) Markdown shows characters literally, so escaping there would show
 * `&lt;`: code is left alone. Autolinks (`<https://...>`) stay links. An image
 * (`![alt](url)`) becomes a link (`[image: alt](url)`), so reading a note fetches nothing.
 *
 * Where code starts and ends is this module's guess at Markdown's grammar, and a guess can
 * be wrong (a heading or a table row splits a code span, a list that ends takes a fence
 * with it). So code that holds what could be markup (`<` before a letter, `/`, `!` or `?`,
 * or an image's `![`) is not left to the guess: it is written as HTML (`<code>`, `<pre>`)
 * with its characters escaped, which shows the same, and which is still text if Markdown
 * reads those lines otherwise. The only `<` of the note that reaches the renderer raw is
 * an autolink's, and no `![` does: whatever Markdown makes of the result, it holds no tag
 * and no image from the note.
 */

const FENCE = /^( {0,3})(`{3,}|~{3,})(.*)$/;
const LIST_ITEM = /^( {0,3})([-+*]|\d{1,9}[.)])( {1,4}(?! )|\t| *$)/;
const AUTOLINK = /^<(?:[a-zA-Z][a-zA-Z0-9+.-]{1,31}:[^\s<>]*|[^\s<>@]+@[^\s<>@]+\.[^\s<>@]+)>/;
/** What in code would be markup or an image if Markdown did not read it as code. */
const MARKUP = /<[A-Za-z/!?]|!\[/;
const PUNCTUATION = /[!-/:-@[-`{-~]/;
const ENTITIES: Record<string, string> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '!': '&#33;' };

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

/** The line without `count` columns of its leading white space (a tab split into spaces). */
function dedent(line: string, count: number): string {
  let columns = 0;
  let i = 0;
  while (i < line.length && columns < count) {
    if (line[i] === ' ') {
      columns += 1;
    } else if (line[i] === '\t') {
      const next = columns + 4 - (columns % 4);
      if (next > count) {
        return ' '.repeat(next - count) + line.slice(i + 1);
      }
      columns = next;
    } else {
      break;
    }
    i++;
  }
  return line.slice(i);
}

/** Text for an HTML element's content: the characters shown as they are, and `!` as an
 * entity, so that read as Markdown (a guess about code gone wrong) it is no image either. */
function htmlText(text: string): string {
  return text.replace(/[&<>!]/g, c => ENTITIES[c]);
}

/**
 * An inline code span holding what could be markup, as `<code>` HTML that shows the same
 * characters. Inside the element Markdown still reads inline syntax, so every ASCII
 * punctuation character is escaped (a backslash, or an entity for `\`, `&`, `<`, `>`).
 */
function codeSpan(content: string): string {
  let code = content.replace(/\n/g, ' '); // as Markdown does in a code span
  if (/^ .*[^ ].* $/.test(code)) {
    code = code.slice(1, -1);
  }
  let out = '';
  for (const char of code) {
    if (char === '&' || char === '<' || char === '>') {
      out += htmlText(char);
    } else if (char === '\\') {
      out += '&#92;';
    } else {
      out += PUNCTUATION.test(char) ? '\\' + char : char;
    }
  }
  return `<code>${out}</code>`;
}

/**
 * A code block's lines, kept as they are unless they hold what could be markup: then as a
 * `<pre>` element (HTML block) at `indent` (spaces), its lines escaped. `content` is how
 * many columns of the lines' white space are the block's (the fence's or the indent's).
 */
function codeBlock(lines: string[], indent: string, content: number): string[] | null {
  if (!lines.some(line => MARKUP.test(line))) {
    return null;
  }
  const body = lines.map((line, i) => (i ? line : dedent(line, content)));
  const out = body.map(line => htmlText(line));
  out[0] = `${indent}<pre><code>${out[0]}`;
  const last = out.length - 1;
  out[last] = out[last].trim() ? `${out[last]}</code></pre>` : `${indent}</code></pre>`;
  return out;
}

/** Escape `&` and `<` in a paragraph's text, leaving inline code spans as they are. */
export function escapeInline(text: string): string {
  let out = '';
  let i = 0;
  while (i < text.length) {
    const char = text[i];
    if (char === '\\' && i + 1 < text.length) {
      // A backslash escape: `\<` and `\&` show `<` and `&`, as their entities do.
      const next = text[i + 1];
      out += next === '<' ? '&lt;' : next === '&' ? '&amp;' : '\\' + next;
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
        const content = text.slice(i + run, close);
        out += MARKUP.test(content) ? codeSpan(content) : text.slice(i, close + run);
        i = close + run;
      } else {
        out += ticks; // no closing run: literal backticks
        i += run;
      }
      continue;
    }
    if (char === '!' && (text[i + 1] === '[' || text[i + 1] === '!')) {
      // An image becomes a link: showing a note must not fetch a URL its writer chose
      // (and the `!` before `![` is escaped, or it would make `[image` an image again).
      out += text[i + 1] === '!' ? '\\!' : text[i + 2] === ']' ? '[image' : '[image: ';
      i += text[i + 1] === '!' ? 1 : 2;
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
  let fence: {
    char: string;
    length: number;
    indent: string;
    opener: string;
    lines: string[];
  } | null = null;
  let indented: { base: number; lines: string[] } | null = null;
  let previousBlank = true;
  let inParagraph = false;
  let listContent = -1; // content column of the list item we are in, -1 outside lists

  const flush = () => {
    if (paragraph.length) {
      out.push(escapeInline(paragraph.join('\n')));
      paragraph = [];
    }
  };
  const endFence = (closing: string[]) => {
    if (fence) {
      const html = codeBlock(fence.lines, fence.indent, fence.indent.length);
      out.push(...(html ?? [fence.opener, ...fence.lines, ...closing]));
      fence = null;
    }
  };
  const endIndented = () => {
    if (indented) {
      let end = indented.lines.length; // blank lines after the block are not in it
      while (end > 0 && !indented.lines[end - 1].trim()) {
        end--;
      }
      const block = indented.lines.slice(0, end);
      const margin = ' '.repeat(indented.base);
      const html = codeBlock(
        block.map((line, i) => (i ? margin + dedent(line, indented!.base + 4) : line)),
        margin,
        indented.base + 4
      );
      out.push(...(html ?? block), ...indented.lines.slice(end));
      indented = null;
    }
  };

  for (const line of lines) {
    if (fence) {
      const closing = FENCE.exec(line);
      if (
        closing &&
        closing[2][0] === fence.char &&
        closing[2].length >= fence.length &&
        !closing[3].trim()
      ) {
        endFence([line]);
      } else {
        fence.lines.push(line);
      }
      continue;
    }
    const opening = FENCE.exec(line);
    if (opening && !(opening[2][0] === '`' && opening[3].includes('`'))) {
      flush();
      endIndented();
      const [, indent, marker] = opening;
      fence = { char: marker[0], length: marker.length, indent, opener: line, lines: [] };
      previousBlank = false;
      inParagraph = false;
      continue;
    }
    if (!line.trim()) {
      flush();
      if (indented) {
        indented.lines.push(line);
      } else {
        out.push(line);
      }
      previousBlank = true;
      inParagraph = false;
      continue;
    }
    const indent = indentOf(line);
    const base = listContent >= 0 ? listContent : 0;
    if (indent >= base + 4 && !inParagraph) {
      // An indented code block (inside a list: indented past the item's content).
      flush();
      if (indented && indented.base !== base) {
        endIndented();
      }
      indented = indented ?? { base, lines: [] };
      indented.lines.push(line);
      previousBlank = false;
      continue;
    }
    endIndented();
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
  endFence([]);
  endIndented();
  return out.join('\n');
}
