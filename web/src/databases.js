// Databases: the data sources, a form to connect one, a connection test, tables and columns.

import { enc, get, post } from './api.js';
import { clear, h } from './dom.js';
import { makeForm } from './forms.js';

const ENGINES = ['postgres', 'mysql', 'mariadb', 'sqlite'];

export function databasesView(state) {
  const list = h('table', { class: 'table', 'data-testid': 'databases' });
  const tables = h('div', { class: 'tables', 'data-testid': 'tables' });
  const outcome = h('div', { class: 'status', 'data-testid': 'connection-status', role: 'status' });
  const { form, inputs } = makeForm({
    testid: 'database-form', submitLabel: 'Connect',
    fields: [
      { name: 'name', label: 'Name' },
      { name: 'engine', label: 'Engine', kind: 'select', options: ENGINES },
      { name: 'parameters', label: 'Parameters (JSON: host, port, user, password, database …)', kind: 'textarea', value: '{}' },
    ],
    onSubmit: async (values) => {
      await post('/api/databases', { name: values.name, engine: values.engine, parameters: parse(values.parameters) });
      outcome.className = 'status ok';
      outcome.textContent = `Connected ${values.name}`;
      state.refreshSchema();
      shown();
    },
  });
  const test = h('button', {
    type: 'button', 'data-testid': 'test-connection',
    onclick: async () => {
      try {
        const answer = await post('/api/databases/status', { engine: inputs.engine.value, parameters: parse(inputs.parameters.value) });
        outcome.className = answer.success ? 'status ok' : 'status error';
        outcome.textContent = answer.success ? 'The connection works.' : `The connection fails: ${answer.error_message ?? ''}`;
      } catch (error) {
        outcome.className = 'status error';
        outcome.textContent = error.message;
      }
    },
  }, 'Test connection');
  const el = h('section', { class: 'databases' }, h('h2', {}, 'Databases'), list,
    h('h3', {}, 'Connect a database'), form, test, outcome, tables);

  async function shown() {
    const databases = await get('/api/databases');
    clear(list).append(h('tr', {}, ['Name', 'Type', 'Engine', ''].map((t) => h('th', {}, t))));
    for (const d of databases.filter((x) => x.type === 'data')) {
      list.append(h('tr', {}, h('td', {}, d.name), h('td', {}, d.type), h('td', {}, d.engine ?? ''),
        h('td', {}, h('button', { type: 'button', onclick: () => browse(d.name) }, 'Tables'))));
    }
  }

  async function browse(name) {
    clear(tables).append(h('h3', {}, `Tables of ${name}`));
    try {
      const found = await get(`/api/databases/${enc(name)}/tables`);
      const source = (state.schema.data_sources || []).find((s) => s.name === name);
      for (const t of found) {
        const columns = source?.tables.find((x) => x.name === t.name)?.columns || [];
        tables.append(h('details', {}, h('summary', {}, `${t.name} (${t.type})`),
          h('ul', {}, columns.map((c) => h('li', {}, `${c.name} ${c.type}`)))));
      }
    } catch (error) {
      tables.append(h('p', { class: 'status error' }, error.message));
    }
  }
  return { el, shown };
}

function parse(text) {
  try {
    return JSON.parse(text);
  } catch (error) {
    throw Object.assign(new Error('The form has an error'), { problem: { errors: { parameters: [`Not valid JSON: ${error.message}`] } } });
  }
}
