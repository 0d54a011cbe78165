// The object tree beside the editor: data sources (the uploaded files among them) with their
// tables and columns, projects with their models and views (a view's columns too). Drawn
// from GET /api/console/schema, every name as text. A branch stays open across redraws; a
// double click on a name puts it (qualified, quoted where it must be) into the editor.

import { clear, h } from './dom.js';

// A name as SQL writes it: bare when it can be, else in backquotes (MindsDB's quoting).
export function sqlName(name) {
  return /^[A-Za-z_][A-Za-z0-9_]*$/.test(name) ? name : `\`${name.replaceAll('`', '``')}\``;
}

const qualified = (...names) => names.map(sqlName).join('.');

export function objectTree({ onUploadClick, onInsert }) {
  const insertOn = (text) => (event) => { event.preventDefault(); onInsert(text); };
  const columnList = (columns) => h('ul', { class: 'tree-columns' }, columns.map((c) => h('li', {
    class: 'tree-column', title: `${c.name} (double-click to insert)`, dataset: { name: c.name }, ondblclick: insertOn(sqlName(c.name)),
  }, h('span', { class: 'tree-name' }, c.name), c.type ? h('span', { class: 'tree-type' }, ` ${c.type}`) : null)));

  const open = new Set(['source:files']);
  const body = h('div', { class: 'tree-body' });
  const uploadButton = h('button', {
    type: 'button', 'data-testid': 'upload-button', title: 'Upload a CSV, TSV, Parquet, JSON or XLSX file as a table of files (or drop it on the page)',
    onclick: () => onUploadClick(),
  }, 'Upload file…');
  const el = h('aside', { class: 'tree', 'data-testid': 'tree' },
    h('div', { class: 'tree-head' }, h('span', { class: 'label' }, 'Objects'), uploadButton), body);

  // A branch that can be opened: its key remembers whether it was.
  function branch(key, kind, name, insert, summaryExtra, children) {
    const node = h('details', { class: `tree-node ${kind}`, dataset: { kind, name }, open: open.has(key) },
      h('summary', { title: `${name} (double-click to insert)`, ondblclick: insertOn(insert) },
        h('span', { class: 'tree-name' }, name), summaryExtra), children);
    node.addEventListener('toggle', () => { if (node.open) open.add(key); else open.delete(key); });
    return node;
  }

  function draw(schema) {
    clear(body);
    const sources = schema.data_sources || [];
    for (const source of sources) {
      const key = `source:${source.name}`;
      const tables = source.tables.map((t) => branch(`${key}:${t.name}`, source.dialect === 'files' ? 'file' : 'table',
        t.name, qualified(source.name, t.name), h('span', { class: 'tree-type' }, ` ${t.columns.length}`), columnList(t.columns)));
      const empty = source.dialect === 'files' && !tables.length
        ? h('p', { class: 'tree-note muted' }, 'No files yet: upload one, or drop it on the page.') : null;
      body.append(branch(key, 'source', source.name, sqlName(source.name),
        h('span', { class: 'tree-type' }, source.dialect === 'files' ? ' uploaded files' : ` ${source.engine || source.dialect}`),
        [source.error ? h('p', { class: 'tree-note error' }, source.error) : null, empty, tables]));
    }
    for (const project of schema.projects || []) {
      const key = `project:${project.name}`;
      const models = project.models.map((m) => h('div', {
        class: 'tree-leaf model', dataset: { kind: 'model', name: m.name }, title: `${m.name} (double-click to insert)`,
        ondblclick: insertOn(qualified(project.name, m.name)),
      },
        h('span', { class: 'tree-name' }, m.name), h('span', { class: 'tree-type' }, ` model, ${m.status}`)));
      const views = (project.views || []).map((v) => branch(`${key}:view:${v.name}`, 'view', v.name, qualified(project.name, v.name),
        h('span', { class: 'tree-type' }, ' view'),
        [v.error ? h('p', { class: 'tree-note error' }, v.error) : null, columnList(v.columns)]));
      body.append(branch(key, 'project', project.name, sqlName(project.name), h('span', { class: 'tree-type' }, ' project'), [models, views]));
    }
  }

  return { el, draw };
}
