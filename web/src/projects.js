// Projects: models (status, version, accuracy; describe drawn as pictures; a predict form),
// skills and agents with forms that show the API's validation errors beside the fields.

import { del, enc, get, post, put } from './api.js';
import { cellText, clear, h, svg } from './dom.js';
import { makeForm } from './forms.js';

export function projectsView(state) {
  const picker = h('select', { 'data-testid': 'project' });
  const body = h('div', { class: 'project-body' });
  const el = h('section', { class: 'projects' }, h('h2', {}, 'Projects'), h('label', {}, 'Project ', picker), body);
  picker.addEventListener('change', () => showProject(picker.value));

  async function shown() {
    const projects = await get('/api/projects');
    const chosen = picker.value || (projects[0] && projects[0].name);
    clear(picker).append(...projects.map((p) => h('option', { value: p.name }, p.name)));
    if (chosen) { picker.value = chosen; showProject(chosen); }
  }

  async function showProject(project) {
    const models = h('div', { 'data-testid': 'models' });
    const detail = h('div', { class: 'model-detail', 'data-testid': 'model-detail' });
    const skills = h('div', { 'data-testid': 'skills' });
    const agents = h('div', { 'data-testid': 'agents' });
    clear(body).append(h('h3', {}, 'Models'), models, detail, h('h3', {}, 'Skills'), skills, h('h3', {}, 'Agents'), agents);
    drawModels(project, models, detail);
    drawResource(project, skills, skillSpec);
    drawResource(project, agents, agentSpec);
  }

  async function drawModels(project, host, detail) {
    const models = await get(`/api/projects/${enc(project)}/models`);
    const table = h('table', { class: 'table' }, h('tr', {}, ['Name', 'Status', 'Version', 'Predicts', 'Accuracy', ''].map((t) => h('th', {}, t))));
    for (const m of models) {
      table.append(h('tr', { dataset: { model: m.name } }, h('td', {}, m.name), h('td', { class: `model-status ${m.status}` }, m.status),
        h('td', {}, m.version ?? ''), h('td', {}, m.predict ?? ''),
        h('td', {}, typeof m.accuracy === 'number' ? m.accuracy.toFixed(3) : ''),
        h('td', {}, h('button', { type: 'button', onclick: () => describe(project, m, detail) }, 'Describe'))));
    }
    clear(host).append(models.length ? table : h('p', { class: 'muted' }, 'No models yet: train one with CREATE MODEL in the SQL view.'));
  }

  // One sentence from describe's info: how the model was measured and on how many rows.
  // Each part only when the answer has it (it was 'undefined training rows' when the
  // answer's fields changed under it).
  function modelSummary(info) {
    const evaluation = info.evaluation || {};
    const scores = Object.entries(info.accuracies || {}).map(([k, v]) => `${k} ${cellText(v)}`).join(', ');
    const measured = [scores, evaluation.rows_scored != null ? `on ${evaluation.rows_scored} rows scored` : '']
      .filter(Boolean).join(' ');
    const head = [info.problem, evaluation.method].filter(Boolean).join(', ');
    const parts = [head && measured ? `${head}: ${measured}` : head || measured];
    if (info.final_model_rows != null) parts.push(`the stored model learned from ${info.final_model_rows} rows`);
    const sentence = parts.filter(Boolean).join('; ');
    return sentence ? `${sentence}.` : '';
  }

  async function describe(project, model, host) {
    clear(host).append(h('h4', {}, `${project}.${model.name}`));
    const base = `/api/projects/${enc(project)}/models/${enc(model.name)}/describe`;
    let info;
    try {
      [info] = await get(`${base}?attribute=info`);
    } catch (error) {
      host.append(h('p', { class: 'status error' }, error.message));
      return;
    }
    host.append(h('p', { 'data-testid': 'model-summary' }, modelSummary(info)));
    host.append(h('h5', {}, 'Column importances'), importanceChart(info.column_importances || {}));
    const candidates = await get(`${base}?attribute=model`).catch(() => []);
    if (candidates.length) {
      host.append(h('h5', {}, 'Candidate estimators'), h('table', { class: 'table', 'data-testid': 'candidates' },
        h('tr', {}, ['Estimator', 'Held-out score', 'Training time (s)', 'Selected'].map((t) => h('th', {}, t))),
        candidates.map((c) => h('tr', { class: c.selected ? 'selected' : '' }, h('td', {}, c.name),
          h('td', {}, c.performance === null ? `failed: ${c.error ?? ''}` : cellText(c.performance)),
          h('td', {}, cellText(c.training_time)), h('td', {}, c.selected ? 'yes' : '')))));
    }
    if (info.confusion_matrix) {
      host.append(h('h5', {}, 'Confusion matrix'), confusionChart(info.confusion_matrix),
        h('p', { class: 'muted' }, info.confusion_matrix.note ?? ''));
    }
    if (info.residuals) {
      host.append(h('h5', {}, 'Residuals'), residualPlot(info.residuals),
        h('p', { class: 'muted' }, info.residuals.note ?? ''));
    }
    host.append(h('h5', {}, 'Predict'), predictForm(project, model, info.inputs || []));
  }

  function predictForm(project, model, inputs) {
    const out = h('div', { class: 'prediction', 'data-testid': 'prediction' });
    const { form } = makeForm({
      testid: 'predict-form', submitLabel: 'Predict',
      fields: inputs.map((name) => ({ name, label: name })),
      onSubmit: async (values) => {
        const row = Object.fromEntries(Object.entries(values).filter(([, v]) => v !== ''));
        // The last answer goes first: kept beside a refused input, it read as that input's.
        clear(out);
        const [answer] = await post(`/api/projects/${enc(project)}/models/${enc(model.name)}/predict`, { data: [row] });
        clear(out).append(h('strong', {}, `${model.predict}: ${cellText(answer[model.predict])}`),
          ` (confidence ${cellText(answer[`${model.predict}_confidence`])})`);
        // A value the model could not read is predicted as missing, and the answer says so.
        const unknown = unknownInputs(answer[`${model.predict}_explain`]);
        if (unknown.length) {
          out.append(h('p', { class: 'muted', 'data-testid': 'unknown-inputs' },
            `Read as missing: ${unknown.map(([name, why]) => `${name} (${why})`).join('; ')}`));
        }
      },
    });
    return h('div', {}, form, out);
  }

  return { el, shown };
}

// The inputs a prediction's explanation lists as unknown, as [column, why] pairs.
function unknownInputs(explain) {
  try {
    const parsed = typeof explain === 'string' ? JSON.parse(explain) : explain;
    return Object.entries((parsed && parsed.unknown_inputs) || {}).map(([k, v]) => [k, cellText(v)]);
  } catch {
    return [];
  }
}

// Column importances as a horizontal bar chart, drawn with SVG elements (no markup strings).
export function importanceChart(importances) {
  const entries = Object.entries(importances).sort((a, b) => b[1] - a[1]);
  const bar = 22;
  const label = 180;
  const width = 560;
  const chart = svg('svg', { class: 'chart', 'data-testid': 'importance-chart', viewBox: `0 0 ${width} ${entries.length * bar + 8}`,
    width, height: entries.length * bar + 8, role: 'img', 'aria-label': 'Column importances' });
  const max = Math.max(1e-9, ...entries.map(([, v]) => v));
  entries.forEach(([name, value], i) => {
    const y = i * bar + 4;
    const w = Math.max(1, ((width - label - 60) * value) / max);
    chart.append(svg('text', { x: label - 6, y: y + 15, 'text-anchor': 'end', class: 'chart-label' }, name),
      svg('rect', { x: label, y: y + 3, width: w, height: bar - 6, class: 'chart-bar' }, svg('title', {}, `${name}: ${value}`)),
      svg('text', { x: label + w + 4, y: y + 15, class: 'chart-value' }, value.toFixed(3)));
  });
  return chart;
}

// The confusion matrix as a heat map: a cell per (actual, predicted), its shade the share of
// the actual class's rows, its count written in it.
export function confusionChart(confusion) {
  const labels = (confusion.labels || []).map((l) => cellText(l));
  const rows = confusion.matrix || [];
  const cell = labels.length > 12 ? 22 : 40;
  const left = 140;
  const top = 110;
  const size = labels.length * cell;
  const width = left + size + 90;  // room for the last label, written at 45°
  const chart = svg('svg', { class: 'chart confusion', 'data-testid': 'confusion-matrix', width, height: top + size + 8,
    viewBox: `0 0 ${width} ${top + size + 8}`, role: 'img', 'aria-label': 'Confusion matrix' });
  chart.append(svg('text', { x: left + size / 2, y: 12, 'text-anchor': 'middle', class: 'chart-axis' }, 'predicted'),
    svg('text', { x: 4, y: top - 6, class: 'chart-axis' }, 'actual'));
  labels.forEach((label, i) => {
    const x = left + i * cell + cell / 2;
    chart.append(svg('text', { x, y: top - 6, transform: `rotate(-45 ${x} ${top - 6})`, class: 'chart-label' }, label),
      svg('text', { x: left - 6, y: top + i * cell + cell / 2 + 4, 'text-anchor': 'end', class: 'chart-label' }, label));
  });
  rows.forEach((row, i) => {
    const total = row.reduce((a, b) => a + b, 0) || 1;
    row.forEach((count, j) => {
      const x = left + j * cell;
      const y = top + i * cell;
      const share = count / total;
      chart.append(svg('rect', { x, y, width: cell - 1, height: cell - 1, class: i === j ? 'cm-cell diag' : 'cm-cell', 'fill-opacity': (0.08 + 0.92 * share).toFixed(3) },
        svg('title', {}, `actual ${labels[i]}, predicted ${labels[j]}: ${count}`)));
      if (cell >= 30) {
        chart.append(svg('text', { x: x + cell / 2, y: y + cell / 2 + 4, 'text-anchor': 'middle', class: share > 0.5 ? 'cm-count dark' : 'cm-count' }, count));
      }
    });
  });
  return chart;
}

// The residual plot: a point per scored row at (predicted, actual − predicted), the zero line.
export function residualPlot(residuals) {
  const xs = residuals.predicted || [];
  const ys = residuals.residual || [];
  const width = 560;
  const height = 300;
  const pad = { left: 60, right: 12, top: 10, bottom: 36 };
  const span = (values) => {
    let lo = Math.min(...values);
    let hi = Math.max(...values);
    if (!Number.isFinite(lo)) { lo = -1; hi = 1; }
    if (lo === hi) { lo -= 1; hi += 1; }
    return [lo, hi];
  };
  const [x0, x1] = span(xs);
  const bound = Math.max(...ys.map(Math.abs), 1e-9);
  const sx = (v) => pad.left + ((v - x0) / (x1 - x0)) * (width - pad.left - pad.right);
  const sy = (v) => pad.top + ((bound - v) / (2 * bound)) * (height - pad.top - pad.bottom);
  const chart = svg('svg', { class: 'chart residuals', 'data-testid': 'residual-plot', width, height,
    viewBox: `0 0 ${width} ${height}`, role: 'img', 'aria-label': 'Residuals against predictions' });
  const bottom = height - pad.bottom;
  chart.append(
    svg('line', { x1: pad.left, x2: pad.left, y1: pad.top, y2: bottom, class: 'chart-axis-line' }),
    svg('line', { x1: pad.left, x2: width - pad.right, y1: bottom, y2: bottom, class: 'chart-axis-line' }),
    svg('line', { x1: pad.left, x2: width - pad.right, y1: sy(0), y2: sy(0), class: 'chart-zero' }),
    svg('text', { x: pad.left - 4, y: pad.top + 10, 'text-anchor': 'end', class: 'chart-value' }, `+${fmt(bound)}`),
    svg('text', { x: pad.left - 4, y: sy(0) + 4, 'text-anchor': 'end', class: 'chart-value' }, '0'),
    svg('text', { x: pad.left - 4, y: bottom, 'text-anchor': 'end', class: 'chart-value' }, `−${fmt(bound)}`),
    svg('text', { x: pad.left, y: bottom + 14, class: 'chart-value' }, fmt(x0)),
    svg('text', { x: width - pad.right, y: bottom + 14, 'text-anchor': 'end', class: 'chart-value' }, fmt(x1)),
    svg('text', { x: (width + pad.left) / 2, y: height - 4, 'text-anchor': 'middle', class: 'chart-axis' }, 'predicted'),
    svg('text', { x: 12, y: (pad.top + bottom) / 2, transform: `rotate(-90 12 ${(pad.top + bottom) / 2})`, 'text-anchor': 'middle', class: 'chart-axis' }, 'actual − predicted'),
  );
  xs.forEach((x, i) => {
    chart.append(svg('circle', { cx: sx(x).toFixed(1), cy: sy(ys[i]).toFixed(1), r: 2.5, class: 'chart-point' },
      svg('title', {}, `predicted ${x}, residual ${ys[i]}`)));
  });
  return chart;
}

function fmt(value) {
  return Math.abs(value) >= 1000 || (Math.abs(value) < 0.01 && value !== 0) ? value.toExponential(2) : Number(value.toPrecision(3)).toString();
}

// --- skills and agents: one table-and-form component for both ---------------------------

const skillSpec = {
  kind: 'skill', path: 'skills',
  columns: (s) => [s.name, s.type, JSON.stringify(s.params)],
  headings: ['Name', 'Type', 'Params'],
  fields: (s) => [
    { name: 'name', label: 'Name', value: s?.name },
    { name: 'type', label: 'Type', value: s?.type ?? 'text2sql' },
    { name: 'params', label: 'Params (JSON object)', kind: 'textarea', value: s ? JSON.stringify(s.params, null, 1) : '{}' },
  ],
  body: (v, old) => ({ skill: { name: v.name, type: v.type, params: jsonField(v.params, 'params', old && JSON.stringify(old.params, null, 1)) } }),
};

const agentSpec = {
  kind: 'agent', path: 'agents',
  columns: (a) => [a.name, a.model_name ?? '', skillNames(a).join(', '), JSON.stringify(a.params)],
  headings: ['Name', 'Model', 'Skills', 'Params'],
  fields: (a) => [
    { name: 'name', label: 'Name', value: a?.name },
    { name: 'model_name', label: 'Model', value: a?.model_name ?? '' },
    { name: 'skills', label: 'Skills (comma separated)', value: skillNames(a).join(', ') },
    { name: 'params', label: 'Params (JSON object)', kind: 'textarea', value: a ? JSON.stringify(a.params, null, 1) : '{}' },
  ],
  body: (v, old) => ({ agent: {
    name: v.name, model_name: v.model_name || null,
    skills: v.skills.split(',').map((s) => s.trim()).filter(Boolean),
    params: jsonField(v.params, 'params', old && JSON.stringify(old.params, null, 1)),
  } }),
};

// An agent's skills come back as skill objects; the form and the table show their names.
function skillNames(agent) {
  return ((agent && agent.skills) || []).map((s) => (typeof s === 'string' ? s : s.name));
}

// A JSON text field; unchanged text is not sent back (its secrets are masked, and sending
// the mask would overwrite them).
function jsonField(text, name, original) {
  if (original !== undefined && text === original) return undefined;
  try {
    return JSON.parse(text);
  } catch (error) {
    const problem = { errors: { [name]: [`Not valid JSON: ${error.message}`] } };
    throw Object.assign(new Error('The form has an error'), { problem });
  }
}

async function drawResource(project, host, spec) {
  const base = `/api/projects/${enc(project)}/${spec.path}`;
  let items = [];
  try {
    items = await get(base);
  } catch (error) {
    clear(host).append(h('p', { class: 'status error' }, error.message));
    return;
  }
  const formHost = h('div', { class: 'form-host' });
  const table = h('table', { class: 'table', 'data-testid': `${spec.kind}-table` },
    h('tr', {}, [...spec.headings, ''].map((t) => h('th', {}, t))));
  for (const item of items) {
    table.append(h('tr', { dataset: { name: item.name } }, spec.columns(item).map((c) => h('td', {}, c)),
      h('td', {},
        h('button', { type: 'button', onclick: () => openForm(item) }, 'Edit'),
        h('button', {
          type: 'button', class: 'danger',
          onclick: async () => {
            if (!window.confirm(`Delete ${spec.kind} ${item.name}?`)) return;
            await del(`${base}/${enc(item.name)}`);
            drawResource(project, host, spec);
          },
        }, 'Delete'))));
  }
  function openForm(item) {
    const { form } = makeForm({
      testid: `${spec.kind}-form`,
      submitLabel: item ? `Save ${spec.kind}` : `Create ${spec.kind}`,
      fields: spec.fields(item),
      onSubmit: async (values) => {
        const body = spec.body(values, item);
        if (item) await put(`${base}/${enc(item.name)}`, body);
        else await post(base, body);
        drawResource(project, host, spec);
      },
    });
    clear(formHost).append(h('h4', {}, item ? `Edit ${spec.kind} ${item.name}` : `New ${spec.kind}`), form);
  }
  clear(host).append(table, h('button', { type: 'button', 'data-testid': `new-${spec.kind}`, onclick: () => openForm(null) }, `New ${spec.kind}`), formHost);
}
