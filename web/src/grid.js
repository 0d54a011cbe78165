// The results grid: only the rows in view (plus a margin) exist in the page, so 100 000
// rows scroll as smoothly as 100. Rows have one fixed height; a spacer gives the scroll
// bar the full height and the visible slice is moved into place with a transform.

import { cellText, clear, h } from './dom.js';

const ROW_HEIGHT = 24;
const OVERSCAN = 10;
const MAX_WIDTH = 360;
const SAMPLE = 200;

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
    this.widths = this.columns.map((c, i) => this.measure(c, i));
    const total = this.widths.reduce((a, b) => a + b, 48);
    clear(this.header);
    this.header.style.width = `${total}px`;
    this.header.append(h('span', { class: 'cell rownum' }, '#'));
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
    for (let i = 0; i < this.rows.length && i < SAMPLE; i++) {
      chars = Math.max(chars, cellText(this.rows[i][index]).length);
    }
    return Math.min(MAX_WIDTH, 16 + chars * 8);
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
      line.append(h('span', { class: 'cell rownum' }, r + 1));
      for (let c = 0; c < this.columns.length; c++) {
        const value = row[c];
        const cell = h('span', { class: value === null ? 'cell null' : `cell ${this.columns[c].type}` },
          cellText(value));
        cell.style.width = `${this.widths[c]}px`;
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
