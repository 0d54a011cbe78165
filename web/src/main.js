// The Quarry console: sign-in, the SQL workspace, history, projects and databases.

import { ApiError, del, enc, get, post } from './api.js';
import { databasesView } from './databases.js';
import { append, clear, h } from './dom.js';
import { createEditor } from './editor.js';
import { makeForm } from './forms.js';
import { Grid } from './grid.js';
import { projectsView } from './projects.js';
import { objectTree } from './tree.js';
import { byteSize, carriesFiles, NAME_PATTERN, sendFile, tableName } from './upload.js';
import './style.css';

const TABS_KEY = 'quarry.console.tabs';
const CANCELLED = 22;  // the error_code of a statement stopped by DELETE /api/sql/queries/<id>

function rowCount(n) {
  return `${n.toLocaleString('en')} ${n === 1 ? 'row' : 'rows'}`;
}
const root = document.getElementById('app');
const state = { schema: { data_sources: [], projects: [] }, user: null };

function loadTabs() {
  try {
    const saved = JSON.parse(localStorage.getItem(TABS_KEY));
    if (saved && Array.isArray(saved.tabs) && saved.tabs.length) return saved;
  } catch { /* a damaged entry: start afresh */ }
  return { tabs: [{ id: 1, title: 'Query 1', sql: 'SELECT 1;', db: '' }], active: 1 };
}

function saveTabs(tabs) {
  localStorage.setItem(TABS_KEY, JSON.stringify(tabs));
}

async function start() {
  const status = await get('/api/status');
  const auth = status.auth || { required: false, signed_in: false };
  if (auth.required && !auth.signed_in) signInPage();
  else shell(auth.required);
}

function signInPage() {
  state.dropFiles = null;
  clear(root);
  const { form } = makeForm({
    testid: 'sign-in',
    submitLabel: 'Sign in',
    fields: [{ name: 'username', label: 'User', autocomplete: 'username' },
      { name: 'password', label: 'Password', kind: 'password', autocomplete: 'current-password' }],
    onSubmit: async (values) => {
      await post('/api/login', values);
      shell(true);
    },
  });
  root.append(h('main', { class: 'sign-in' }, h('h1', {}, 'Quarry'), h('p', {}, 'Sign in to use the console.'), form));
}

function shell(signedIn) {
  clear(root);
  // Each view is built when first shown: the SQL view (the editor) comes first and alone.
  const makers = { sql: sqlView, history: historyView, projects: () => projectsView(state), databases: () => databasesView(state) };
  const views = {};
  const view = (name) => (views[name] ||= makers[name]());
  const main = h('main', { class: 'content' });
  const nav = h('nav', { class: 'nav' });
  const show = (name) => {
    for (const button of nav.querySelectorAll('button[data-view]')) {
      button.classList.toggle('active', button.dataset.view === name);
    }
    clear(main).append(view(name).el);
    view(name).shown?.();
  };
  for (const [name, label] of [['sql', 'SQL'], ['history', 'History'], ['projects', 'Projects'], ['databases', 'Databases']]) {
    nav.append(h('button', { type: 'button', dataset: { view: name }, onclick: () => show(name) }, label));
  }
  if (signedIn) {
    nav.append(h('button', {
      type: 'button', class: 'sign-out', 'data-testid': 'sign-out',
      onclick: async () => { await post('/api/logout'); signInPage(); },
    }, 'Sign out'));
  }
  root.append(h('header', { class: 'top' }, h('span', { class: 'brand' }, 'Quarry'), nav), main);
  state.runStatement = (text, db) => { show('sql'); view('sql').run(text, db); };
  state.dropFiles = (files) => { show('sql'); view('sql').offerFiles(files); };
  show('sql');
  // The editor takes input from here on (bench/console.py reads this mark).
  performance.mark('quarry:interactive');
  refreshSchema();
}

export async function refreshSchema() {
  try {
    state.schema = await get('/api/console/schema');
    state.onSchema?.forEach((f) => f(state.schema));
  } catch { /* autocomplete goes without: the editor still works */ }
}
state.onSchema = [];
state.refreshSchema = refreshSchema;

// --- the SQL workspace ------------------------------------------------------------------

function sqlView() {
  const tabs = loadTabs();
  const tabBar = h('div', { class: 'tabs', role: 'tablist' });
  const dbSelect = h('select', { class: 'db', 'data-testid': 'db', title: 'Default database of the statement' });
  const runButton = h('button', { type: 'button', class: 'primary', 'data-testid': 'run', title: 'Ctrl/Cmd+Enter' }, 'Run');
  const stopButton = h('button', { type: 'button', 'data-testid': 'stop', disabled: true }, 'Stop');
  const elapsed = h('span', { class: 'elapsed', 'data-testid': 'elapsed' });
  const csvButton = h('button', { type: 'button', 'data-testid': 'export-csv', disabled: true }, 'Export CSV');
  const jsonlButton = h('button', { type: 'button', 'data-testid': 'export-jsonl', disabled: true }, 'Export JSON lines');
  const saveButton = h('button', { type: 'button', 'data-testid': 'save-query' }, 'Save…');
  const status = h('div', { class: 'status', 'data-testid': 'status', role: 'status' });
  const gridHost = h('div', { class: 'grid-host' });
  const editorHost = h('div', { class: 'editor', 'data-testid': 'editor' });
  const fileInput = h('input', { type: 'file', class: 'file-input', 'data-testid': 'upload-input', tabindex: -1 });
  const tree = objectTree({ onUploadClick: () => fileInput.click(), onInsert: (text) => editor.insert(text) });
  const work = h('div', { class: 'work' }, tabBar,
    h('div', { class: 'toolbar' }, dbSelect, runButton, stopButton, elapsed, csvButton, jsonlButton, saveButton),
    editorHost, status, gridHost);
  const el = h('section', { class: 'sql' }, tree.el, work, fileInput);
  const grid = new Grid(gridHost);
  let running = null;
  let lastRun = null;

  const current = () => tabs.tabs.find((t) => t.id === tabs.active) || tabs.tabs[0];
  const editor = createEditor(editorHost, {
    doc: current().sql,
    onRun: () => run(),
    onChange: (text) => { current().sql = text; saveTabs(tabs); },
  });

  function drawTabs() {
    clear(tabBar);
    for (const tab of tabs.tabs) {
      const close = h('span', {
        class: 'close', title: 'Close tab',
        onclick: (event) => {
          event.stopPropagation();
          if (tabs.tabs.length === 1) return;
          tabs.tabs = tabs.tabs.filter((t) => t !== tab);
          if (tabs.active === tab.id) select(tabs.tabs[0]);
          saveTabs(tabs);
          drawTabs();
        },
      }, '×');
      tabBar.append(h('button', {
        type: 'button', role: 'tab', class: tab.id === tabs.active ? 'tab active' : 'tab',
        onclick: () => select(tab),
      }, tab.title, close));
    }
    tabBar.append(h('button', {
      type: 'button', class: 'tab add', 'data-testid': 'new-tab', title: 'New tab',
      onclick: () => {
        const id = Math.max(...tabs.tabs.map((t) => t.id)) + 1;
        const tab = { id, title: `Query ${id}`, sql: '', db: current().db };
        tabs.tabs.push(tab);
        select(tab);
      },
    }, '+'));
  }

  function select(tab) {
    tabs.active = tab.id;
    saveTabs(tabs);
    editor.setText(tab.sql);
    dbSelect.value = tab.db || '';
    drawTabs();
    editor.focus();
  }

  function fillDatabases(schema) {
    const chosen = current().db || '';
    clear(dbSelect).append(h('option', { value: '' }, '(default database)'));
    for (const s of schema.data_sources) dbSelect.append(h('option', { value: s.name }, s.name));
    for (const p of schema.projects) dbSelect.append(h('option', { value: p.name }, p.name));
    dbSelect.value = chosen;
  }
  state.onSchema.push((schema) => { editor.setSchema(schema); fillDatabases(schema); tree.draw(schema); });
  tree.draw(state.schema);
  dbSelect.addEventListener('change', () => { current().db = dbSelect.value; saveTabs(tabs); });

  async function run(text = editor.statement(), db = dbSelect.value) {
    text = text.trim();
    if (!text || running) return;
    const started = performance.now();
    const controller = new AbortController();
    running = { started, startedAt: new Date(), controller };
    runButton.disabled = true;
    stopButton.disabled = false;
    csvButton.disabled = jsonlButton.disabled = true;
    status.className = 'status running';
    status.textContent = 'Running…';
    const timer = setInterval(() => { elapsed.textContent = `${((performance.now() - started) / 1000).toFixed(1)} s`; }, 100);
    try {
      const answer = await post('/api/sql/query', { query: text, context: db ? { db } : {} },
        { signal: controller.signal });
      const ms = performance.now() - started;
      if (answer.type === 'error' && running.cancelled && answer.error_code === CANCELLED) {
        showCancelled(ms);
      } else if (answer.type === 'error') {
        showError(answer.error_code, answer.error_message, text);
      } else if (answer.type === 'table') {
        const t0 = performance.now();
        grid.show(answer.column_names, answer.data);
        const drawn = performance.now() - t0;
        status.className = 'status ok';
        // dom.js's append, not the DOM's: that one writes a missing part as the text "null".
        append(clear(status), [
          h('span', { 'data-testid': 'row-count' }, rowCount(answer.data.length)),
          h('span', {}, ` in ${ms.toFixed(0)} ms`),
          answer.truncated ? h('span', { class: 'truncated', 'data-testid': 'truncated' },
            '. Truncated: the answer stops at the row limit; export the whole result instead.') : null,
        ]);
        performance.measure?.('quarry:grid', { start: t0, duration: drawn });
        lastRun = { text, db };
        csvButton.disabled = jsonlButton.disabled = false;
        if (/^\s*(create|drop|alter|retrain)\b/i.test(text)) state.refreshSchema();
      } else {
        grid.show([], []);
        status.className = 'status ok';
        status.textContent = `OK in ${ms.toFixed(0)} ms`;
        state.refreshSchema();
      }
    } catch (error) {
      const problem = error instanceof ApiError ? error.problem : {};
      if (running.cancelled && (error.name === 'AbortError' || problem.error_code === CANCELLED)) {
        showCancelled(performance.now() - started);
      } else {
        showError(problem.error_code || error.status || 'network', error.message, text);
      }
    } finally {
      clearInterval(timer);
      elapsed.textContent = `${((performance.now() - started) / 1000).toFixed(1)} s`;
      running = null;
      runButton.disabled = false;
      stopButton.disabled = true;
    }
  }

  function showError(code, message, text) {
    grid.show([], []);
    status.className = 'status error';
    clear(status).append(h('span', { class: 'code', 'data-testid': 'error-code' }, `Error ${code}:`), ' ',
      h('span', { 'data-testid': 'error-message' }, message),
      h('pre', { class: 'statement' }, text));
  }

  // Stopped by the user's own Stop: what they asked for, not an error of the statement.
  function showCancelled(ms) {
    grid.show([], []);
    status.className = 'status cancelled';
    status.textContent = `Cancelled after ${(ms / 1000).toFixed(1)} s`;
  }

  // Stop: cancel, inside the database, the statements of this user that started after this
  // run did (GET /api/sql/queries lists them from every worker).
  stopButton.addEventListener('click', async () => {
    if (!running) return;
    const since = running.startedAt.getTime() - 1000;
    running.cancelled = true;
    stopButton.disabled = true;
    try {
      // A statement is listed once its worker has registered it: under load that can come
      // a moment after the click, so the list is asked again for a few seconds.
      for (let tries = 0; running && tries < 20; tries += 1) {
        const queries = await get('/api/sql/queries');
        const mine = queries.filter((q) => Date.parse(q.started_at) >= since);
        if (mine.length) {
          await Promise.all(mine.map((q) => del(`/api/sql/queries/${enc(q.query_id)}`).catch(() => null)));
          break;
        }
        await new Promise((resolve) => { setTimeout(resolve, 250); });
      }
    } catch {
      running?.controller.abort();  // no cancel endpoint: at least stop waiting
    }
  });

  async function exportAs(format) {
    if (!lastRun) return;
    const response = await fetch('/api/sql/query', {
      method: 'POST', credentials: 'same-origin',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ query: lastRun.text, context: lastRun.db ? { db: lastRun.db } : {}, response_format: format }),
    });
    const blob = await response.blob();
    const link = h('a', { href: URL.createObjectURL(blob), download: format === 'csv' ? 'result.csv' : 'result.jsonl' });
    document.body.append(link);
    link.click();
    link.remove();
    setTimeout(() => URL.revokeObjectURL(link.href), 10_000);
  }
  csvButton.addEventListener('click', () => exportAs('csv'));
  jsonlButton.addEventListener('click', () => exportAs('jsonlines'));

  // Save: a small form (name, project) that shows the API's errors beside its fields.
  const saveHost = h('div', { class: 'save-host' });
  work.insertBefore(saveHost, status);
  saveButton.addEventListener('click', () => {
    if (saveHost.firstChild) { clear(saveHost); return; }
    const projects = state.schema.projects.map((p) => p.name);
    const { form, inputs } = makeForm({
      testid: 'save-form', submitLabel: 'Save query',
      fields: [
        { name: 'name', label: 'Name' },
        { name: 'project', label: 'Project', kind: 'select', options: projects.length ? projects : ['mindsdb'] },
      ],
      onSubmit: async (values) => {
        const statement = editor.statement().trim();
        await post(`/api/console/projects/${enc(values.project)}/saved`, { name: values.name, statement, database: dbSelect.value || null });
        clear(saveHost);
        status.className = 'status ok';
        status.textContent = `Saved as ${values.project}.${values.name}`;
      },
    });
    clear(saveHost).append(form);
    inputs.name.focus();
  });

  // Upload: the files chosen (button) or dropped, one after the other, each under a name the
  // user may change; the progress and the server's answer in the status line.
  const uploadHost = h('div', { class: 'upload-host' });
  work.insertBefore(uploadHost, status);
  let waiting = [];
  fileInput.multiple = true;
  fileInput.addEventListener('change', () => {
    const files = Array.from(fileInput.files);
    fileInput.value = '';  // the same file again is a new choice
    if (files.length) offerFiles(files);
  });

  function offerFiles(files) {
    waiting = files.slice(1);
    offerUpload(files[0]);
  }

  function offerNext() {
    if (waiting.length) offerUpload(waiting.shift());
  }

  function offerUpload(file) {
    const nameInput = h('input', { type: 'text', name: 'name', value: tableName(file.name), 'data-testid': 'upload-name', spellcheck: false, size: 30 });
    const nameError = h('span', { class: 'field-error', 'data-testid': 'upload-name-error' });
    const form = h('form', { class: 'upload-form', 'data-testid': 'upload-form', novalidate: true },
      h('span', {}, 'Upload ', h('strong', {}, file.name), ` (${byteSize(file.size)}) as files.`),
      nameInput,
      h('button', { type: 'submit', class: 'primary', 'data-testid': 'upload-submit' }, 'Upload'),
      h('button', { type: 'button', 'data-testid': 'upload-cancel', onclick: () => { clear(uploadHost); offerNext(); } }, 'Cancel'),
      waiting.length ? h('span', { class: 'muted', 'data-testid': 'upload-waiting' }, `then ${waiting.length} more`) : null,
      nameError);
    form.addEventListener('submit', (event) => {
      event.preventDefault();
      const name = nameInput.value.trim();
      if (!NAME_PATTERN.test(name)) {
        nameError.textContent = ' 1-63 letters, digits, _ or -, not starting with a digit.';
        return;
      }
      clear(uploadHost);
      upload(file, name, false);
    });
    clear(uploadHost).append(form);
    nameInput.focus();
    nameInput.select();
  }

  async function upload(file, name, overwrite) {
    const controller = new AbortController();
    const progress = h('span', { 'data-testid': 'upload-progress' }, `Uploading ${file.name} as files.${name}…`);
    const stop = h('button', { type: 'button', 'data-testid': 'upload-stop', onclick: () => controller.abort() }, 'Stop');
    status.className = 'status running';
    clear(status).append(progress, ' ', stop);
    const onProgress = (sent, total) => {
      if (sent < total) {
        progress.textContent = `Uploading ${file.name} as files.${name}: ${Math.floor((100 * sent) / total)}% of ${byteSize(total)}`;
      } else {
        stop.remove();  // all sent: the server stores it now, whatever this page does
        progress.textContent = `Storing files.${name}: the server reads and converts ${file.name}…`;
      }
    };
    try {
      const stored = await sendFile(file, name, { overwrite, onProgress, signal: controller.signal });
      status.className = 'status ok';
      status.textContent = `Uploaded files.${stored.name}: ${rowCount(stored.row_count)}, `
        + `${stored.columns.length} ${stored.columns.length === 1 ? 'column' : 'columns'}.`;
      await state.refreshSchema();
    } catch (error) {
      if (controller.signal.aborted) {  // the user's own Stop: not a refusal
        status.className = 'status cancelled';
        status.textContent = `Upload of ${file.name} stopped: nothing was stored.`;
        offerNext();
        return;
      }
      // The refusal goes in the status line; the grid keeps the last result, which the
      // upload did not change.
      const problem = error.problem || {};
      status.className = 'status error';
      clear(status).append(h('span', { class: 'code', 'data-testid': 'error-code' }, `Upload refused (${error.status || 'network'}):`), ' ',
        h('span', { 'data-testid': 'error-message' }, error.message));
      if (problem.title === 'File already exists' && !overwrite) {
        // Replacing is the user's choice, made here: never without this click.
        status.append(' ', h('button', {
          type: 'button', class: 'danger', 'data-testid': 'upload-replace',
          onclick: () => upload(file, name, true),
        }, `Replace files.${name}`));
      }
    }
    offerNext();
  }

  runButton.addEventListener('click', () => run());
  drawTabs();
  return {
    el,
    offerFiles,
    shown: () => editor.focus(),
    run: (text, db) => {
      const tab = current();
      tab.sql = text;
      tab.db = db || '';
      select(tab);
      run(text, db || '');
    },
    grid,
  };
}

// --- history and saved queries ----------------------------------------------------------

function historyView() {
  const search = h('input', { type: 'search', placeholder: 'Search statements and errors', 'data-testid': 'history-search' });
  const list = h('table', { class: 'table', 'data-testid': 'history' });
  const savedProject = h('select', { 'data-testid': 'saved-project' });
  const savedSearch = h('input', { type: 'search', placeholder: 'Find a saved query by name or text', 'data-testid': 'saved-search' });
  const savedList = h('table', { class: 'table', 'data-testid': 'saved' });
  const el = h('section', { class: 'history' }, h('h2', {}, 'History'),
    h('p', { class: 'muted' }, 'Every statement you ran, from this page or any other client; kept by the server.'), search, list,
    h('h2', {}, 'Saved queries'), h('div', { class: 'toolbar' }, h('label', {}, 'Project ', savedProject), savedSearch), savedList);
  let timer = null;
  let saved = [];

  async function loadHistory() {
    const rows = await get(`/api/console/history?q=${enc(search.value)}`);
    clear(list).append(h('tr', {}, ['Ran at', 'Statement', 'Database', 'Duration', 'Rows', 'Outcome', ''].map((t) => h('th', {}, t))));
    for (const r of rows) {
      list.append(h('tr', { dataset: { id: r.id } },
        h('td', {}, new Date(r.ran_at).toLocaleString()),
        h('td', { class: 'mono' }, r.statement),
        h('td', {}, r.database || ''),
        h('td', {}, r.duration_ms === null ? '' : `${Math.round(r.duration_ms)} ms`),
        h('td', {}, r.row_count ?? ''),
        h('td', { class: `outcome ${r.outcome}` }, r.outcome === 'error' ? `error ${r.error_code ?? ''}: ${r.error_message ?? ''}` : r.outcome),
        h('td', {}, h('button', { type: 'button', class: 'rerun', onclick: () => state.runStatement(r.statement, r.database) }, 'Run again'))));
    }
  }

  function drawSaved() {
    const needle = savedSearch.value.trim().toLowerCase();
    clear(savedList).append(h('tr', {}, ['Name', 'Statement', 'Database', 'Saved by', ''].map((t) => h('th', {}, t))));
    for (const s of saved) {
      if (needle && !s.name.toLowerCase().includes(needle) && !s.statement.toLowerCase().includes(needle)) continue;
      savedList.append(h('tr', { dataset: { name: s.name } }, h('td', {}, s.name), h('td', { class: 'mono' }, s.statement), h('td', {}, s.database || ''),
        h('td', {}, s.created_by || ''),
        h('td', {}, h('button', { type: 'button', class: 'rerun', onclick: () => state.runStatement(s.statement, s.database) }, 'Run'),
          h('button', {
            type: 'button', class: 'danger',
            onclick: async () => {
              if (!window.confirm(`Delete saved query ${s.name}?`)) return;
              await del(`/api/console/projects/${enc(savedProject.value)}/saved/${enc(s.name)}`);
              loadSaved();
            },
          }, 'Delete'))));
    }
  }

  async function loadSaved() {
    saved = savedProject.value ? await get(`/api/console/projects/${enc(savedProject.value)}/saved`).catch(() => []) : [];
    drawSaved();
  }

  async function load() {
    const chosen = savedProject.value || 'mindsdb';
    const projects = await get('/api/projects').catch(() => []);
    clear(savedProject).append(...projects.map((p) => h('option', { value: p.name }, p.name)));
    if (projects.some((p) => p.name === chosen)) savedProject.value = chosen;
    await Promise.all([loadHistory(), loadSaved()]);
  }
  search.addEventListener('input', () => { clearTimeout(timer); timer = setTimeout(loadHistory, 200); });
  savedSearch.addEventListener('input', drawSaved);
  savedProject.addEventListener('change', loadSaved);
  return { el, shown: load };
}

// A file dropped anywhere on the page is offered for upload (in the capture phase: the
// editor would otherwise insert its text, and the browser open it in place of the console).
let dragEnd = null;
window.addEventListener('dragover', (event) => {
  if (!carriesFiles(event)) return;
  event.preventDefault();
  event.stopPropagation();
  event.dataTransfer.dropEffect = state.dropFiles ? 'copy' : 'none';
  document.body.classList.toggle('dropping', Boolean(state.dropFiles));
  clearTimeout(dragEnd);
  dragEnd = setTimeout(() => document.body.classList.remove('dropping'), 200);
}, true);
window.addEventListener('drop', (event) => {
  if (!carriesFiles(event)) return;
  event.preventDefault();
  event.stopPropagation();
  document.body.classList.remove('dropping');
  const files = Array.from(event.dataTransfer.files);
  if (files.length && state.dropFiles) state.dropFiles(files);
}, true);

start().catch((error) => {
  clear(root).append(h('p', { class: 'status error' }, `The console could not start: ${error.message}`));
});
