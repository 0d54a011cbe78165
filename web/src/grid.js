// The results grid: only the rows in view (plus a margin) exist in the page, so 100 000
// rows scroll as smoothly as 100. Rows have one fixed height; a spacer gives the scroll
// bar the full height and the visible slice is moved into place with a transform.

import { cellText, clear, h } from './dom.js';

const ROW_HEIGHT = 24;
const OVERSCAN = 10;
const MAX_WIDTH = 360;
const SAMPLE = 200;
const CHAR = 8;      // px per character of the grid's 12px monospace, with a little to spare
const PADDING = 16;  // a cell's padding and border

// The rows whose text sets the columns' widths: the first ones, the last ones and some
// spread between (values often grow down a result: ids, counters, 'row 99999'), so the
// widths stay a fixed cost however many rows there are.
export function sampleRows(count) {
  if (count <= SAMPLE) return Array.from({ length: count }, (_, i) => i);
  const picked = new Set();
  const third = Math.floor(SAMPLE / 3);
  for (let i = 0; i < third; i++) {
    picked.add(i);
    picked.add(count - 1 - i);
    picked.add(Math.floor((i * count) / third));
  }
  return [...picked];
}

export function columnType(rows, index) {
  let kind = null;
  for (let i = 0; i < rows.length && i < 1000; i++) {
    const value = rows[i][index];
    if (value === null || value === undefined) continue;
    const t = typeof value === 'number' ? (Number.isInteger(value) ? 'integer' : 'float')
      : typeof value === 'boolean' ? 'boolean'
        : typeof value === 'object' ? 'json' : 'text';
    if (kind === null) kind = t;
    else if (kind !== t) kind = kind === 'integer' && t === 'float' ? 'float'
      : kind === 'float' && t === 'integer' ? 'float' : 'mixed';
  }
  return kind || 'null';
}

export class Grid {
  constructor(host) {
    this.host = host;
    this.columns = [];
    this.rows = [];
    this.first = -1;
    this.last = -1;
    this.viewport = h('div', { class: 'grid-viewport', tabindex: '0', 'data-testid': 'grid' });
    this.header = h('div', { class: 'grid-header' });
    this.spacer = h('div', { class: 'grid-spacer' });
    this.body = h('div', { class: 'grid-body' });
    this.spacer.append(this.body);
    this.viewport.append(this.header, this.spacer);
    host.append(this.viewport);
    // No result, no grid: an empty box with a lone '#' header read as a broken table.
    host.hidden = true;
    this.viewport.addEventListener('scroll', () => this.paint(), { passive: true });
    new ResizeObserver(() => this.paint()).observe(this.viewport);
  }

  show(columns, rows) {
    this.host.hidden = columns.length === 0;  // first: the rows in view need its height
    this.columns = columns.map((name, i) => ({ name, type: columnType(rows, i) }));
    this.rows = rows;
    this.sample = sampleRows(rows.length);
    this.widths = this.columns.map((c, i) => this.measure(c, i));
    // The row numbers' column fits the last one (100000 was cut to '100…' in 48 px).
    this.rownumWidth = Math.max(48, PADDING + String(rows.length).length * CHAR);
    const total = this.widths.reduce((a, b) => a + b, this.rownumWidth);
    clear(this.header);
    this.header.style.width = `${total}px`;
    this.header.append(this.rownum('#'));
    this.columns.forEach((c, i) => {
      const cell = h('span', { class: 'cell', title: `${c.name} (${c.type})` },
        h('span', { class: 'col-name' }, c.name), h('span', { class: 'col-type' }, c.type));
      cell.style.width = `${this.widths[i]}px`;
      this.header.append(cell);
    });
    this.spacer.style.height = `${rows.length * ROW_HEIGHT}px`;
    this.spacer.style.width = `${total}px`;
    this.viewport.scrollTop = 0;
    this.first = this.last = -1;
    this.paint();
  }

  measure(column, index) {
    // Width from the header and a sample of values, in characters: no layout pass per row.
    let chars = Math.max(column.name.length, column.type.length + 2);
    for (const i of this.sample) {
      chars = Math.max(chars, cellText(this.rows[i][index]).length);
    }
    return Math.min(MAX_WIDTH, PADDING + chars * CHAR);
  }

  rownum(text) {
    const cell = h('span', { class: 'cell rownum' }, text);
    cell.style.width = `${this.rownumWidth}px`;
    return cell;
  }

  paint() {
    const top = this.viewport.scrollTop;
    const height = this.viewport.clientHeight || 400;
    const first = Math.max(0, Math.floor(top / ROW_HEIGHT) - OVERSCAN);
    const last = Math.min(this.rows.length, Math.ceil((top + height) / ROW_HEIGHT) + OVERSCAN);
    if (first === this.first && last === this.last) return;
    this.first = first;
    this.last = last;
    const fragment = document.createDocumentFragment();
    for (let r = first; r < last; r++) {
      const row = this.rows[r];
      const line = h('div', { class: r % 2 ? 'grid-row odd' : 'grid-row' });
      line.append(this.rownum(r + 1));
      for (let c = 0; c < this.columns.length; c++) {
        const value = row[c];
        const text = cellText(value);
        const cell = h('span', { class: value === null ? 'cell null' : `cell ${this.columns[c].type}` }, text);
        cell.style.width = `${this.widths[c]}px`;
        // A value wider than its column is cut with '…': the whole of it shows on hover.
        if (PADDING + text.length * CHAR > this.widths[c]) cell.title = text;
        line.append(cell);
      }
      fragment.append(line);
    }
    clear(this.body).append(fragment);
    this.body.style.transform = `translateY(${first * ROW_HEIGHT}px)`;
  }

  renderedRows() {
    return this.body.childElementCount;
  }
}
