// The SQL editor: CodeMirror 6 with SQL highlighting and completion of data sources,
// tables (uploaded files among them), columns, projects, models and views (from
// GET /api/console/schema).

import { autocompletion, closeBrackets, closeCompletion, completionKeymap } from '@codemirror/autocomplete';
import { defaultKeymap, history, historyKeymap } from '@codemirror/commands';
import { MySQL, sql } from '@codemirror/lang-sql';
import { bracketMatching, defaultHighlightStyle, syntaxHighlighting } from '@codemirror/language';
import { Compartment, EditorState } from '@codemirror/state';
import { EditorView, drawSelection, highlightActiveLine, keymap, lineNumbers } from '@codemirror/view';

const language = new Compartment();

// CodeMirror's schema shape: nested objects down to tables, whose value is the column list.
export function completionSchema(schema) {
  const tree = {};
  for (const source of schema.data_sources || []) {
    const tables = {};
    for (const table of source.tables) {
      tables[table.name] = table.columns.map((c) => ({ label: c.name, type: 'property', detail: c.type }));
    }
    tree[source.name] = tables;
  }
  for (const project of schema.projects || []) {
    const models = tree[project.name] || {};
    for (const model of project.models) {
      models[model.name] = [];
    }
    for (const view of project.views || []) {
      models[view.name] = view.columns.map((c) => ({ label: c.name, type: 'property', detail: 'view column' }));
    }
    models.models = [];
    tree[project.name] = models;
  }
  return tree;
}

function languageFor(schema) {
  return sql({ dialect: MySQL, schema: completionSchema(schema), upperCaseKeywords: true });
}

// CodeMirror writes its styles at run time. Inside a shadow root it uses a constructed style
// sheet (adoptedStyleSheets), which the console's Content-Security-Policy allows; a browser
// without them gets a <style> element, which the policy (no 'unsafe-inline') refuses unless
// it carries the nonce the server put in this page's policy and its <meta property=csp-nonce>
// (read through .nonce: browsers hide the attribute itself from the page's styles).
const cspNonce = document.querySelector('meta[property="csp-nonce"]')?.nonce || '';
//
// The editable area fills the whole box: a click anywhere in it, even far below a one-line
// statement, lands on the text and puts the caret there. Were the text shorter than the box,
// a click under it would land on the page, and Ctrl+A would then select the whole page.
// So the box's height bounds live here, on the editor itself, and its text and gutter are
// at least as tall as the box; past the maximum, the editor's own scroller scrolls.
const MIN_HEIGHT = '120px';
const look = EditorView.theme({
  '&': { minHeight: MIN_HEIGHT, maxHeight: '40vh', fontSize: '13px', backgroundColor: '#fff' },
  '.cm-scroller': {
    fontFamily: 'ui-monospace, SFMono-Regular, Menlo, monospace',
    flex: '1 1 auto', minHeight: '0', height: 'auto', overflow: 'auto',
  },
  '.cm-content, .cm-gutter': { minHeight: MIN_HEIGHT },
  '&.cm-focused': { outline: 'none' },
});

export function createEditor(host, { doc, onRun, onChange }) {
  const shadow = host.attachShadow({ mode: 'open' });
  const parent = document.createElement('div');
  shadow.append(parent);
  const runKeys = keymap.of([
    // An open completion list is of the text before the run: left open over the editor, the
    // next Enter would put its stale choice in.
    { key: 'Mod-Enter', preventDefault: true, run: (v) => { closeCompletion(v); onRun(); return true; } },
  ]);
  const view = new EditorView({
    parent,
    root: shadow,
    state: EditorState.create({
      doc,
      extensions: [
        runKeys,
        cspNonce ? EditorView.cspNonce.of(cspNonce) : [],
        look,
        lineNumbers(),
        history(),
        drawSelection(),
        highlightActiveLine(),
        bracketMatching(),
        closeBrackets(),
        autocompletion({ activateOnTyping: true }),
        syntaxHighlighting(defaultHighlightStyle, { fallback: true }),
        language.of(languageFor({})),
        keymap.of([...completionKeymap, ...historyKeymap, ...defaultKeymap]),
        EditorView.lineWrapping,
        EditorView.updateListener.of((update) => {
          if (update.docChanged) onChange(update.state.doc.toString());
        }),
      ],
    }),
  });
  // The line numbers are in the box too, but CodeMirror leaves a click on them to the page.
  // It puts the caret at the start of the line clicked, or at the end below the last line.
  // (Only there: a press on the scroller's own bar must still drag it.)
  view.dom.addEventListener('mousedown', (event) => {
    const gutters = view.dom.querySelector('.cm-gutters');
    if (event.button !== 0 || !(event.target === view.dom || gutters?.contains(event.target))) return;
    event.preventDefault();
    const end = view.state.doc.length;
    const below = event.clientY > (view.coordsAtPos(end)?.bottom ?? -Infinity);
    const left = view.contentDOM.getBoundingClientRect().left + 1;
    const pos = below ? end : view.posAtCoords({ x: left, y: event.clientY }, false);
    view.focus();
    view.dispatch({ selection: { anchor: pos } });
  });
  return {
    view,
    setSchema(schema) { view.dispatch({ effects: language.reconfigure(languageFor(schema)) }); },
    // Text at the caret (in place of the selection), the editor focused.
    insert(text) {
      view.dispatch(view.state.replaceSelection(text), { scrollIntoView: true });
      view.focus();
    },
    setText(text) { view.dispatch({ changes: { from: 0, to: view.state.doc.length, insert: text } }); },
    // The selection when there is one (run the selection), else the whole text.
    statement() {
      const { from, to } = view.state.selection.main;
      return from === to ? view.state.doc.toString() : view.state.sliceDoc(from, to);
    },
    focus() { view.focus(); },
  };
}
