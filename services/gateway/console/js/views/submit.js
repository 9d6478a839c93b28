// Start a run: a DSL pasted, uploaded from a file or picked from the saved workflows, an input
// form built from the input node's JSON Schema, options, then POST /tasks (idempotent).

import { api, idempotencyKey } from '../api.js';
import { navigate } from '../app.js';
import { h, clear, badge, busy, empty, errorBox, field, select, toast } from '../ui.js';
import { drawDag } from '../dag.js';

export const DSL_CACHE = 'agentix.dsl.';

const EXAMPLE = {
  version: '1',
  nodes: [
    { id: 'in', kind: 'input', label: 'Question', config: { schema: { type: 'object', required: ['text'], properties: { text: { type: 'string', title: 'Question' } } } } },
    { id: 'ans', kind: 'agent', label: 'Answer', config: { system: 'You are a concise assistant.', prompt: 'Answer briefly: {{ in.text }}' } },
    { id: 'out', kind: 'output', config: { value: '{{ ans.output }}' } },
  ],
  edges: [{ source: 'in', target: 'ans' }, { source: 'ans', target: 'out' }],
};

/** The input node's schema, or null. */
export function inputSchema(dsl) {
  const node = (dsl?.nodes || []).find((n) => n && n.kind === 'input');
  const schema = node?.config?.schema;
  return schema && typeof schema === 'object' ? schema : null;
}

/** Build form controls from a JSON Schema's top-level properties; returns {el, read()}. */
export function inputForm(schema) {
  const props = schema && schema.properties && typeof schema.properties === 'object' ? schema.properties : { text: { type: 'string', title: 'Text' } };
  const required = new Set(schema?.required || (schema ? [] : ['text']));
  const readers = [];
  const fields = Object.entries(props).map(([name, p]) => {
    const label = `${p.title || name}${required.has(name) ? ' *' : ''}`;
    const type = Array.isArray(p.type) ? p.type.find((t) => t !== 'null') : p.type;
    let input;
    let read;
    if (Array.isArray(p.enum)) {
      input = select(p.enum.map((v) => [String(v), String(v)]), p.default !== undefined ? String(p.default) : undefined, { name });
      read = () => { const v = p.enum.find((e) => String(e) === input.value); return v; };
    } else if (type === 'boolean') {
      input = h('input', { type: 'checkbox', name, checked: p.default === true });
      read = () => input.checked;
    } else if (type === 'number' || type === 'integer') {
      input = h('input', { type: 'number', name, step: type === 'integer' ? '1' : 'any', value: p.default ?? '' });
      read = () => (input.value === '' ? undefined : Number(input.value));
    } else if (type === 'array' || type === 'object') {
      input = h('textarea', { name, rows: 4, placeholder: type === 'array' ? '["one", "two"]' : '{"key": "value"}' }, p.default !== undefined ? JSON.stringify(p.default, null, 2) : '');
      read = () => {
        if (!input.value.trim()) return undefined;
        try { return JSON.parse(input.value); } catch { throw new Error(`${name}: not valid JSON`); }
      };
    } else {
      const long = /text|question|prompt|message|content|body/i.test(name) || (p.maxLength || 0) > 200;
      input = long ? h('textarea', { name, rows: 3, style: 'font-family: inherit' }, p.default ?? '') : h('input', { name, value: p.default ?? '' });
      read = () => (input.value === '' ? undefined : input.value);
    }
    if (required.has(name)) input.setAttribute('aria-required', 'true');
    readers.push([name, read]);
    return field(label, input, p.description);
  });
  return {
    el: h('div', {}, fields),
    read() {
      const out = {};
      for (const [name, read] of readers) {
        const v = read();
        if (v !== undefined) out[name] = v;
        else if (required.has(name)) throw new Error(`${name} is required`);
      }
      return out;
    },
  };
}

export default {
  title: 'New run',
  async render(main) {
    const state = { source: 'paste', dsl: null, workflowId: null };
    const problem = h('div');
    const dslText = h('textarea', { rows: 14, spellcheck: 'false', 'aria-label': 'Workflow DSL (JSON)', placeholder: '{"version": "1", "nodes": [...], "edges": [...]}' });
    const fileInput = h('input', { type: 'file', accept: '.json,application/json', 'aria-label': 'DSL file' });
    const workflows = select([['', 'Loading saved workflows…']], '', { 'aria-label': 'Saved workflow' });
    const preview = h('div', { class: 'graph-box', 'data-testid': 'preview' }, empty('Paste, upload or pick a workflow to see its graph.'));
    const validation = h('div', { 'aria-live': 'polite' });
    const inputBox = h('div');
    const rawToggle = h('input', { type: 'checkbox', id: 'raw-input' });
    const rawInput = h('textarea', { rows: 5, 'aria-label': 'Input as JSON' }, '{}');
    let form = inputForm(null);
    const budget = h('input', { type: 'number', min: 1, placeholder: 'default' });
    const timeout = h('input', { type: 'number', min: 1, placeholder: 'default' });
    const model = h('input', { placeholder: 'active chain' });
    const submit = h('button', { type: 'submit', class: 'primary', 'data-action': 'submit-run' }, 'Start run');
    const key = idempotencyKey(); // one per form: a double click never starts two runs

    const panels = {};
    const tabs = ['paste', 'upload', 'saved'].map((id) => h('button', {
      type: 'button', role: 'tab', id: `tab-${id}`, 'aria-controls': `panel-${id}`,
      onclick: () => showTab(id),
    }, { paste: 'Paste', upload: 'Upload file', saved: 'Saved workflow' }[id]));
    panels.paste = h('div', { role: 'tabpanel', id: 'panel-paste', 'aria-labelledby': 'tab-paste' },
      dslText, h('div', { class: 'actions' }, h('button', { type: 'button', onclick: () => { dslText.value = JSON.stringify(EXAMPLE, null, 2); parse(); } }, 'Insert example')));
    panels.upload = h('div', { role: 'tabpanel', id: 'panel-upload', 'aria-labelledby': 'tab-upload' },
      field('DSL file (.json)', fileInput, 'The file is read in the browser; its text appears under “Paste”.'));
    panels.saved = h('div', { role: 'tabpanel', id: 'panel-saved', 'aria-labelledby': 'tab-saved' }, field('Workflow', workflows));

    // Arrow keys move between tabs, as the tab pattern expects.
    tabs.forEach((t, i) => t.addEventListener('keydown', (ev) => {
      const step = { ArrowRight: 1, ArrowLeft: -1 }[ev.key];
      if (!step) return;
      const next = tabs[(i + step + tabs.length) % tabs.length];
      next.focus();
      next.click();
    }));

    function showTab(id) {
      state.source = id;
      for (const t of tabs) t.setAttribute('aria-selected', String(t.id === `tab-${id}`));
      for (const [pid, p] of Object.entries(panels)) p.hidden = pid !== id;
      if (id !== 'saved') state.workflowId = null;
    }

    let schemaKey = 'null';
    let previewDag = null;
    function setDsl(dsl) {
      state.dsl = dsl;
      clear(validation);
      if (!dsl) { clear(preview, empty('Paste, upload or pick a workflow to see its graph.')); return; }
      previewDag = drawDag(dsl, { label: 'Workflow preview' });
      clear(preview, previewDag.svg);
      // Rebuild the input form only when the schema changed, so typed values survive edits.
      const key = JSON.stringify(inputSchema(dsl));
      if (key !== schemaKey) {
        schemaKey = key;
        form = inputForm(inputSchema(dsl));
        clear(inputBox, form.el);
      }
    }

    let parsedText = null;
    function parse() {
      const text = dslText.value.trim();
      if (text === parsedText && state.dsl) return;
      parsedText = text;
      if (!text) { setDsl(null); return; }
      try {
        const dsl = JSON.parse(text);
        if (!dsl || typeof dsl !== 'object' || Array.isArray(dsl)) throw new Error('the DSL must be a JSON object');
        setDsl(dsl);
      } catch (err) {
        state.dsl = null;
        parsedText = null;
        clear(validation, errorBox(new Error(`Not valid JSON: ${err.message}`)));
      }
    }

    let typing = null;
    dslText.addEventListener('input', () => { clearTimeout(typing); typing = setTimeout(parse, 300); });
    fileInput.addEventListener('change', async () => {
      const file = fileInput.files[0];
      if (!file) return;
      if (file.size > 1024 * 1024) { clear(validation, errorBox(new Error('The file is larger than 1 MiB, the DSL limit.'))); return; }
      dslText.value = await file.text();
      parse();
      showTab('paste');
      toast(`Loaded ${file.name}.`, 'ok');
    });
    workflows.addEventListener('change', async () => {
      if (!workflows.value) { setDsl(null); return; }
      try {
        const wf = await api(`/workflows/${encodeURIComponent(workflows.value)}`);
        state.workflowId = wf.id;
        dslText.value = JSON.stringify(wf.dsl, null, 2);
        setDsl(wf.dsl);
      } catch (err) { clear(validation, errorBox(err)); }
    });
    rawToggle.addEventListener('change', () => {
      if (rawToggle.checked) {
        try { rawInput.value = JSON.stringify(form.read(), null, 2); } catch { /* keep what is there */ }
      }
      inputBox.hidden = rawToggle.checked;
      rawInput.hidden = !rawToggle.checked;
    });
    rawInput.hidden = true;

    const validateBtn = h('button', { type: 'button' }, 'Validate');
    validateBtn.addEventListener('click', () => busy(validateBtn, async () => {
      parse();
      if (!state.dsl) return;
      try {
        const out = await api('/dsl/validate', { method: 'POST', body: state.dsl });
        clear(validation, h('div', { class: 'notice ok' }, badge('valid', 'ok'), ' The workflow is valid.',
          (out.warnings || []).length ? h('ul', {}, out.warnings.map((w) => h('li', {}, typeof w === 'string' ? w : `${w.code || ''} ${w.node_id ? `(${w.node_id})` : ''} ${w.message || ''}`))) : null));
      } catch (err) {
        clear(validation, errorBox(err));
        // Point at the nodes the errors name.
        for (const e of err.errors || []) if (e.node_id && previewDag) previewDag.setStatus(e.node_id, 'failed');
      }
    }));
    const saveBtn = h('button', { type: 'button' }, 'Save as workflow');
    saveBtn.addEventListener('click', () => busy(saveBtn, async () => {
      parse();
      if (!state.dsl) return;
      const name = window.prompt('Name of the saved workflow');
      if (!name) return;
      try {
        const wf = await api('/workflows', { method: 'POST', body: { name, dsl: state.dsl } });
        toast(`Saved as ${wf.name || name}.`, 'ok');
        loadWorkflows();
      } catch (err) { clear(validation, errorBox(err)); }
    }));

    const formEl = h('form', { 'aria-label': 'Start a run' },
      h('div', { class: 'grid-2' },
        h('section', { class: 'panel', 'aria-labelledby': 'sub-dsl' },
          h('h2', { id: 'sub-dsl' }, 'Workflow'),
          h('div', { class: 'tabs', role: 'tablist', 'aria-label': 'Where the workflow comes from' }, tabs),
          panels.paste, panels.upload, panels.saved,
          h('div', { class: 'actions' }, validateBtn, saveBtn),
          validation),
        h('section', { class: 'panel', 'aria-labelledby': 'sub-in' },
          h('h2', { id: 'sub-in' }, 'Input'),
          inputBox,
          h('div', { class: 'field inline' }, rawToggle, h('label', { for: 'raw-input' }, 'Edit the input as JSON')),
          rawInput,
          h('fieldset', {}, h('legend', {}, 'Options'),
            h('div', { class: 'form-grid' }, field('Token budget', budget), field('Timeout (s)', timeout), field('Model alias', model))),
          problem,
          h('div', { class: 'actions' }, submit))),
      h('section', { class: 'panel', 'aria-labelledby': 'sub-graph' }, h('h2', { id: 'sub-graph' }, 'Graph'), preview));

    formEl.addEventListener('submit', (ev) => {
      ev.preventDefault();
      busy(submit, async () => {
        clear(problem);
        try {
          if (state.source !== 'saved' || !state.workflowId) parse();
          if (!state.dsl && !state.workflowId) throw new Error('Give a workflow first: paste it, upload a file or pick a saved one.');
          const input = rawToggle.checked ? JSON.parse(rawInput.value || '{}') : form.read();
          const options = {};
          if (budget.value) options.token_budget = Number(budget.value);
          if (timeout.value) options.timeout_s = Number(timeout.value);
          if (model.value.trim()) options.model = model.value.trim();
          const body = state.workflowId && state.source === 'saved' ? { workflow_id: state.workflowId } : { dsl: state.dsl };
          const out = await api('/tasks', { method: 'POST', body: { ...body, input, options }, headers: { 'Idempotency-Key': key } });
          try { sessionStorage.setItem(DSL_CACHE + out.id, JSON.stringify(state.dsl)); } catch { /* the viewer can do without */ }
          navigate(`/runs/${encodeURIComponent(out.id)}`);
        } catch (err) {
          clear(problem, errorBox(err));
        }
      });
    });

    async function loadWorkflows() {
      try {
        const page = await api('/workflows', { query: { limit: 200 } });
        const items = page.items || [];
        clear(workflows, ...select([['', items.length ? 'Pick a workflow…' : 'No saved workflow'], ...items.map((w) => [w.id, w.name || w.id])], '').children);
      } catch (err) {
        clear(workflows, h('option', { value: '' }, `Could not load workflows: ${err.message}`));
      }
    }

    main.append(h('div', { class: 'page-head' }, h('h1', {}, 'New run'), h('a', { href: '/console/runs' }, 'All runs')), formEl);
    clear(inputBox, form.el);
    showTab('paste');
    loadWorkflows();
  },
};
