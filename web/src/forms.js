// Forms that show the API's validation errors beside the fields they name.

import { clear, h } from './dom.js';

// The problem's `errors` object, flattened to field name → messages (the last key of each
// path: {"skill": {"name": [...]}} → name).
export function fieldErrors(problem) {
  const found = {};
  const walk = (node, key) => {
    if (Array.isArray(node)) {
      if (node.every((m) => typeof m === 'string')) (found[key] ||= []).push(...node);
      else node.forEach((n) => walk(n, key));
    } else if (node && typeof node === 'object') {
      for (const [k, v] of Object.entries(node)) walk(v, /^\d+$/.test(k) ? key : k);
    } else if (typeof node === 'string') {
      (found[key] ||= []).push(node);
    }
  };
  walk((problem && problem.errors) || {}, '_form');
  return found;
}

// fields: [{name, label, kind: 'text'|'textarea'|'select'|'password', options, value,
//           autocomplete}] — autocomplete tells the browser's password manager what a field is.
export function makeForm({ fields, submitLabel, onSubmit, testid }) {
  const inputs = {};
  const errors = {};
  const general = h('div', { class: 'form-error', role: 'alert' });
  const form = h('form', { class: 'form', 'data-testid': testid, novalidate: true });
  for (const f of fields) {
    let input;
    if (f.kind === 'textarea') input = h('textarea', { name: f.name, rows: 4 });
    else if (f.kind === 'select') {
      input = h('select', { name: f.name }, f.options.map((o) => h('option', { value: o }, o)));
    } else input = h('input', { name: f.name, type: f.kind === 'password' ? 'password' : 'text' });
    if (f.value !== undefined && f.value !== null) input.value = f.value;
    if (f.autocomplete) input.autocomplete = f.autocomplete;
    inputs[f.name] = input;
    errors[f.name] = h('span', { class: 'field-error', 'data-field': f.name });
    form.append(h('label', { class: 'field' }, h('span', { class: 'label' }, f.label || f.name),
      input, errors[f.name]));
  }
  form.append(h('div', { class: 'actions' }, h('button', { type: 'submit' }, submitLabel)), general);
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    Object.values(errors).forEach(clear);
    clear(general);
    const values = Object.fromEntries(Object.entries(inputs).map(([k, el]) => [k, el.value]));
    try {
      await onSubmit(values);
    } catch (error) {
      const byField = fieldErrors(error.problem);
      let shown = false;
      for (const [field, messages] of Object.entries(byField)) {
        if (errors[field]) {
          errors[field].textContent = messages.join(' ');
          shown = true;
        }
      }
      if (!shown || byField._form) general.textContent = error.message;
    }
  });
  return { form, inputs, errors, general };
}
