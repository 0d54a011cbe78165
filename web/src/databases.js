// Databases: the data sources, a form to connect one, a connection test, tables and columns.

import { del, enc, get, post } from './api.js';
import { cellText, clear, h } from './dom.js';
import { makeForm } from './forms.js';

// Each engine's connection fields (the names are MindsDB's parameters).
const SERVER = ['host', 'port', 'database', 'user', 'password'];
const ENGINE_FIELDS = {
  postgres: [...SERVER, 'schema', 'sslmode'],
  mysql: SERVER,
  mariadb: SERVER,
  sqlite: ['db_file'],
};
const LABELS = { db_file: 'Database file', sslmode: 'SSL mode' };

export function databasesView(state) {
  const list = h('table', { class: 'table', 'data-testid': 'databases' });
  const tables = h('div', { class: 'tables', 'data-testid': 'tables' });
  const outcome = h('div', { class: 'status', 'data-testid': 'connection-status', role: 'status' });
  const parameterNames = [...new Set(Object.values(ENGINE_FIELDS).flat())];
  const { form, inputs } = makeForm({
    testid: 'database-form', submitLabel: 'Connect',
    fields: [
      { name: 'name', label: 'Name' },
      { name: 'engine', label: 'Engine', kind: 'select', options: Object.keys(ENGINE_FIELDS) },
      // A database's account, not the console's: the browser must not fill in the Quarry
      // sign-in it saved.
      ...parameterNames.map((name) => ({
        name, label: LABELS[name] || name[0].toUpperCase() + name.slice(1),
        kind: name === 'password' ? 'password' : 'text',
        autocomplete: { password: 'new-password', user: 'off' }[name],
      })),
    ],
    onSubmit: async (values) => {
      await post('/api/databases', { database: { name: values.name, engine: values.engine, parameters: parameters(values) } });
      outcome.className = 'status ok';
      outcome.textContent = `Connected ${values.name}.`;
      await state.refreshSchema();
      await shown();
      browse(values.name);
    },
  });
  // Only the chosen engine's fields are shown.
  const showFields = () => {
    const wanted = new Set(ENGINE_FIELDS[inputs.engine.value]);
    for (const name of parameterNames) inputs[name].closest('label').hidden = !wanted.has(name);
  };
  inputs.engine.addEventListener('change', showFields);
  showFields();
  inputs.port.placeholder = 'the engine\'s default';

  function parameters(values) {
    const found = {};
    for (const name of ENGINE_FIELDS[values.engine]) {
      const value = values[name].trim();
      if (value !== '') found[name] = name === 'port' && /^\d+$/.test(value) ? Number(value) : value;
    }
    return found;
  }

  const test = h('button', {
    type: 'button', 'data-testid': 'test-connection',
    onclick: async () => {
      outcome.className = 'status running';
      outcome.textContent = 'Testing…';
      const values = Object.fromEntries(Object.entries(inputs).map(([k, el]) => [k, el.value]));
      try {
        const answer = await post('/api/databases/status', { engine: values.engine, parameters: parameters(values) });
        const works = answer.status === 'success';
        outcome.className = works ? 'status ok' : 'status error';
        outcome.textContent = works ? 'The connection works.' : `The connection fails: ${answer.detail ?? ''}`;
      } catch (error) {
        outcome.className = 'status error';
        outcome.textContent = error.message;
      }
    },
  }, 'Test connection');
  form.querySelector('.actions').append(test);
  // A database's tables come right under the list whose Tables button shows them (below the
  // form they were drawn off screen, and the button seemed to do nothing).
  const el = h('section', { class: 'databases' }, h('h2', {}, 'Databases'), list, tables,
    h('h3', {}, 'Connect a database'), form, outcome);

  async function shown() {
    const databases = await get('/api/databases');
    clear(list).append(h('tr', {}, ['Name', 'Engine', 'Connection', ''].map((t) => h('th', {}, t))));
    for (const d of databases.filter((x) => x.type === 'data')) {
      list.append(h('tr', { dataset: { name: d.name } }, h('td', {}, d.name), h('td', {}, d.engine ?? ''),
        h('td', { class: 'mono' }, d.connection_data ? cellText(d.connection_data) : ''),
        h('td', {},
          h('button', { type: 'button', class: 'browse', onclick: () => browse(d.name) }, 'Tables'),
          d.deletable ? h('button', {
            type: 'button', class: 'danger',
            onclick: async () => {
              if (!window.confirm(`Disconnect database ${d.name}?`)) return;
              await del(`/api/databases/${enc(d.name)}`);
              clear(tables);
              await state.refreshSchema();
              shown();
            },
          }, 'Disconnect') : null)));
    }
  }

  async function browse(name) {
    clear(tables).append(h('h3', {}, `Tables of ${name}`));
    tables.scrollIntoView({ block: 'nearest' });
    try {
      const [found, schema] = await Promise.all([get(`/api/databases/${enc(name)}/tables`),
        get(`/api/console/schema?database=${enc(name)}`)]);
      const source = schema.data_sources[0];
      if (source?.error) tables.append(h('p', { class: 'status error' }, source.error));
      if (!found.length) tables.append(h('p', { class: 'muted' }, 'No tables.'));
      for (const t of found) {
        const columns = source?.tables.find((x) => x.name === t.name)?.columns || [];
        tables.append(h('details', { dataset: { table: t.name } }, h('summary', {}, `${t.name} (${t.type})`),
          h('table', { class: 'table' }, h('tr', {}, h('th', {}, 'Column'), h('th', {}, 'Type')),
            columns.map((c) => h('tr', {}, h('td', {}, c.name), h('td', {}, c.type))))));
      }
    } catch (error) {
      tables.append(h('p', { class: 'status error' }, error.message));
    }
  }
  return { el, shown };
}
