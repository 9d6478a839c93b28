// Models (admins): configs with a write-only API key, the failover chain, breaker states, and
// proof that every dispatcher applied the last change (the chain revision each one reports in
// its heartbeat, compared with the revision the PUT returned).

import { api } from '../api.js';
import { h, clear, badge, busy, dialog, empty, errorBox, field, fmtTime, select, table, toast, poll } from '../ui.js';
import { breakerTable } from './status.js';

/** The chain revision a dispatcher reports in its heartbeat detail (a few spellings accepted). */
export function chainRevisionOf(detail) {
  if (!detail || typeof detail !== 'object') return null;
  const candidates = [
    detail.chain_revision,
    detail.chain && detail.chain.revision,
    detail.models && detail.models.chain_revision,
    detail.models && detail.models.revision,
    detail.control && (detail.control.chain_revision ?? (detail.control['models.chain'] && detail.control['models.chain'].revision)),
  ];
  const found = candidates.find((v) => typeof v === 'number');
  return found === undefined ? null : found;
}

function modelBody(m, changes = {}) {
  const body = {
    name: m.name, provider: m.provider, base_url: m.base_url || null, model: m.model,
    params: m.params || {}, enabled: m.enabled, ...changes,
  };
  if (!body.api_key) delete body.api_key; // write-only: leaving it out keeps the stored key
  return body;
}

// The model built into every dispatcher: it can be chained without a stored model of that name.
export const OFFLINE_MODEL = 'offline';
const BUILT_IN_HELP = 'the AGENTIX_LLM_* endpoint the dispatchers were started with, else the offline model';

/**
 * The choices for adding a model to the draft chain: stored models not in it yet, and the
 * built-in offline model (unless the draft has it, or a stored model takes its name).
 */
export function chainChoices(models, draft) {
  const names = new Set(models.map((m) => m.name));
  const choices = models.filter((m) => !draft.includes(m.name)).map((m) => [m.name, m.name]);
  if (!names.has(OFFLINE_MODEL) && !draft.includes(OFFLINE_MODEL)) choices.push([OFFLINE_MODEL, `${OFFLINE_MODEL} (built-in)`]);
  return choices;
}

function numberOrNull(v) {
  return v === '' || v === null || v === undefined ? null : Number(v);
}

function modelForm(existing, onSaved) {
  const m = existing || { provider: 'openai', params: {}, enabled: true };
  const name = h('input', { name: 'name', value: m.name || '', required: true, pattern: '[A-Za-z0-9_.:\\-]{1,100}', autocomplete: 'off' });
  const provider = select([['openai', 'OpenAI-compatible'], ['offline', 'Offline (built-in)']], m.provider, { name: 'provider' });
  const baseUrl = h('input', { name: 'base_url', type: 'url', value: m.base_url || '', placeholder: 'https://…/v1' });
  const model = h('input', { name: 'model', value: m.model || '', required: true, autocomplete: 'off' });
  const apiKey = h('input', {
    name: 'api_key', type: 'password', autocomplete: 'new-password',
    placeholder: existing ? (existing.has_api_key ? 'stored — leave empty to keep it' : 'none stored') : 'optional',
  });
  const p = m.params || {};
  const temperature = h('input', { name: 'temperature', type: 'number', step: '0.1', min: '0', max: '2', value: p.temperature ?? '' });
  const maxTokens = h('input', { name: 'max_tokens', type: 'number', min: '1', value: p.max_tokens ?? '' });
  const timeout = h('input', { name: 'timeout_s', type: 'number', min: '1', step: '1', value: p.timeout_s ?? '' });
  const enabled = h('input', { name: 'enabled', type: 'checkbox', id: 'model-enabled', checked: m.enabled !== false });
  const problem = h('div');
  const save = h('button', { type: 'submit', class: 'primary' }, existing ? 'Save model' : 'Add model');
  const form = h('form', { class: 'model-form' },
    h('div', { class: 'form-grid' },
      field('Name (alias)', name, 'used by the chain and by agent nodes'),
      field('Provider', provider),
      field('Base URL', baseUrl),
      field('Model', model),
      field('API key', apiKey, 'write-only: never shown again'),
      field('Temperature', temperature),
      field('Max tokens', maxTokens),
      field('Timeout (s)', timeout)),
    h('div', { class: 'field inline' }, enabled, h('label', { for: 'model-enabled' }, 'Enabled')),
    problem,
    h('div', { class: 'actions' }, save, h('button', { type: 'button', onclick: () => dlg.close() }, 'Cancel')));
  const dlg = dialog(existing ? `Edit model ${existing.name}` : 'Add a model', form);
  form.addEventListener('submit', (ev) => {
    ev.preventDefault();
    busy(save, async () => {
      clear(problem);
      const params = { ...(m.params || {}) };
      for (const [k, input] of [['temperature', temperature], ['max_tokens', maxTokens], ['timeout_s', timeout]]) {
        const v = numberOrNull(input.value);
        if (v === null) delete params[k]; else params[k] = v;
      }
      const body = modelBody({
        name: name.value.trim(), provider: provider.value, base_url: baseUrl.value.trim() || null,
        model: model.value.trim(), params, enabled: enabled.checked,
      }, apiKey.value ? { api_key: apiKey.value } : {});
      try {
        const out = existing
          ? await api(`/admin/models/${encodeURIComponent(existing.id)}`, { method: 'PUT', body })
          : await api('/admin/models', { method: 'POST', body });
        apiKey.value = '';
        dlg.close();
        toast(`Model ${out.name} saved.`, 'ok');
        onSaved(out);
      } catch (err) {
        clear(problem, errorBox(err));
      }
    });
  });
}

export default {
  title: 'Models',
  admin: true,
  render(main) {
    const state = {
      models: [],
      chain: { revision: 0, active: null, fallbacks: [] },
      draft: null, // the chain being edited: [name, ...], active first
      target: null, // {revision, at}: the change whose application we are watching
      dispatchers: [],
      breakers: {},
    };
    const problem = h('div');
    const modelsBox = h('div', { 'data-testid': 'models' }, h('p', { class: 'muted' }, 'Loading…'));
    const chainBox = h('div', { 'data-testid': 'chain' });
    const applyBox = h('div', { 'data-testid': 'apply', 'aria-live': 'polite' });
    const breakersBox = h('div', { 'data-testid': 'breakers' });

    const chainNames = () => (state.chain.active ? [state.chain.active, ...state.chain.fallbacks] : [...state.chain.fallbacks]);
    const dirty = () => state.draft && JSON.stringify(state.draft) !== JSON.stringify(chainNames());

    async function load() {
      const [models, chain] = await Promise.all([api('/admin/models', { query: { limit: 200 } }), api('/admin/models/chain')]);
      state.models = models.items;
      state.chain = { revision: chain.revision || 0, active: chain.active || null, fallbacks: chain.fallbacks || [] };
      if (!dirty()) state.draft = chainNames();
      if (!state.target && state.chain.revision) state.target = { revision: state.chain.revision, at: null };
      draw();
    }

    function watch(revision) {
      state.target = { revision, at: new Date().toISOString() };
      drawApply();
    }

    async function afterModelChange() {
      await load();
      // Saving a model re-publishes the chain (its revision grows): watch that one apply too.
      watch(state.chain.revision);
    }

    function moveToFront(name) {
      const d = (state.draft || chainNames()).filter((n) => n !== name);
      state.draft = [name, ...d];
      drawChain();
      toast(`${name} is first in the draft chain — press “Save chain” to apply it.`);
    }

    async function toggle(m, button) {
      await busy(button, async () => {
        await api(`/admin/models/${encodeURIComponent(m.id)}`, { method: 'PUT', body: modelBody(m, { enabled: !m.enabled }) });
        toast(`${m.name} ${m.enabled ? 'disabled' : 'enabled'}.`, 'ok');
        await afterModelChange();
      });
    }

    async function remove(m, button) {
      if (!window.confirm(`Delete model ${m.name}?`)) return;
      await busy(button, async () => {
        await api(`/admin/models/${encodeURIComponent(m.id)}`, { method: 'DELETE' });
        toast(`${m.name} deleted.`, 'ok');
        await afterModelChange();
      });
    }

    function chainPosition(name) {
      const i = chainNames().indexOf(name);
      if (i < 0) return '—';
      return i === 0 ? badge('active', 'active') : `fallback ${i}`;
    }

    function drawModels() {
      clear(modelsBox, state.models.length
        ? table([
          { label: 'Name', cell: (m) => h('strong', {}, m.name) },
          { label: 'Provider', cell: (m) => m.provider },
          { label: 'Model', cell: (m) => h('code', {}, m.model) },
          { label: 'Base URL', class: 'wrap', cell: (m) => m.base_url || '—' },
          { label: 'API key', cell: (m) => (m.has_api_key ? badge('stored', 'ok') : badge('none', 'disabled')) },
          { label: 'Enabled', cell: (m) => (m.enabled ? badge('enabled', 'enabled') : badge('disabled', 'disabled')) },
          { label: 'Chain', cell: (m) => chainPosition(m.name) },
          { label: 'Breaker', cell: (m) => { const b = state.breakers[m.name]; return b ? badge(b.state.replace('_', '-'), b.state) : '—'; } },
          { label: 'Actions', cell: (m) => h('div', { class: 'actions' },
            h('button', { type: 'button', class: 'small', onclick: () => modelForm(m, afterModelChange) }, 'Edit'),
            h('button', { type: 'button', class: 'small', onclick: (ev) => toggle(m, ev.currentTarget) }, m.enabled ? 'Disable' : 'Enable'),
            h('button', { type: 'button', class: 'small', 'data-action': 'front', 'aria-label': `Move ${m.name} to the front of the chain`, onclick: () => moveToFront(m.name) }, 'Move to front'),
            h('button', { type: 'button', class: 'small danger', onclick: (ev) => remove(m, ev.currentTarget) }, 'Delete')) },
        ], state.models, { caption: 'Models', rowAttrs: (m) => ({ 'data-model': m.name }) })
        : empty(`No model configured yet. Tasks use the dispatchers' built-in model (${BUILT_IN_HELP}) until you chain one.`,
          h('button', { type: 'button', class: 'primary', onclick: () => modelForm(null, afterModelChange) }, 'Add a model')));
    }

    /** PUT the chain (`active: null` clears it), then watch the dispatchers apply it. */
    async function putChain(active, fallbacks) {
      const out = await api('/admin/models/chain', { method: 'PUT', body: { active, fallbacks } });
      state.chain = { revision: out.revision, active: out.active || null, fallbacks: out.fallbacks || [] };
      state.draft = chainNames();
      watch(out.revision);
      draw();
      return out;
    }

    function confirmClear() {
      const problem = h('div');
      const yes = h('button', { type: 'button', class: 'danger solid', 'data-action': 'confirm-clear' }, 'Clear chain');
      const body = h('div', { class: 'body' },
        h('p', {}, 'Every dispatcher stops using ', h('strong', {}, chainNames().join(' → ')),
          ' for new tasks and goes back to its built-in model: ', BUILT_IN_HELP, '.'),
        h('p', { class: 'muted small' }, 'Running tasks keep the chain they started with. The models stay configured; you can chain them again later.'),
        problem,
        h('div', { class: 'actions' }, yes, h('button', { type: 'button', onclick: () => dlg.close() }, 'Cancel')));
      const dlg = dialog('Clear the failover chain?', body);
      yes.addEventListener('click', () => busy(yes, async () => {
        try {
          const out = await putChain(null, []);
          dlg.close();
          toast(`Chain cleared (revision ${out.revision}): the built-in model answers.`, 'ok');
        } catch (err) {
          clear(problem, errorBox(err));
        }
      }));
    }

    function drawChain() {
      const draft = state.draft || [];
      const known = new Set([OFFLINE_MODEL, ...state.models.map((m) => m.name)]);
      const addable = chainChoices(state.models, draft);
      const move = (i, j) => {
        const d = [...draft];
        [d[i], d[j]] = [d[j], d[i]];
        state.draft = d;
        drawChain();
      };
      const addSel = select([['', draft.length ? 'Add a fallback…' : 'Choose the active model…'], ...addable], '', { 'aria-label': 'Add a model to the chain' });
      const saveBtn = h('button', { type: 'button', class: 'primary', disabled: !dirty() || !draft.length, 'data-action': 'save-chain' }, 'Save chain');
      saveBtn.addEventListener('click', () => busy(saveBtn, async () => {
        const [active, ...fallbacks] = draft;
        const out = await putChain(active, fallbacks);
        toast(`Chain saved (revision ${out.revision}).`, 'ok');
      }));
      // Clearing is its own action, confirmed: an emptied draft is not saved by "Save chain".
      const clearBtn = h('button', {
        type: 'button', class: 'danger', 'data-action': 'clear-chain', disabled: !state.chain.active,
        title: state.chain.active ? `Go back to the built-in model: ${BUILT_IN_HELP}` : 'No chain is set',
      }, 'Clear chain — use the built-in model');
      clearBtn.addEventListener('click', confirmClear);
      clear(chainBox,
        draft.length
          ? h('ol', { class: 'chain', 'aria-label': 'Failover chain, first is active' }, draft.map((name, i) => h('li', { 'data-name': name },
            h('span', { class: 'pos' }, `${i + 1}.`),
            h('span', { class: 'name' }, name, ' ', i === 0 ? badge('active', 'active') : h('span', { class: 'muted small' }, 'fallback'),
              name === OFFLINE_MODEL && !state.models.some((m) => m.name === name) ? [' ', badge('built-in', 'disabled')] : null,
              known.has(name) ? null : badge('unknown model', 'error')),
            h('button', { type: 'button', class: 'small', disabled: i === 0, 'aria-label': `Move ${name} up`, onclick: () => move(i, i - 1) }, '↑'),
            h('button', { type: 'button', class: 'small', disabled: i === draft.length - 1, 'aria-label': `Move ${name} down`, onclick: () => move(i, i + 1) }, '↓'),
            h('button', { type: 'button', class: 'small danger', 'aria-label': `Remove ${name} from the chain`, onclick: () => { state.draft = draft.filter((n) => n !== name); drawChain(); } }, 'Remove'))))
          : empty(state.chain.active
            ? 'The draft is empty: add a model, or use “Clear chain” to go back to the built-in model.'
            : `No chain set: tasks use the dispatchers' built-in model (${BUILT_IN_HELP}).`),
        h('div', { class: 'actions' },
          addable.length ? addSel : null,
          saveBtn,
          h('button', { type: 'button', disabled: !dirty(), onclick: () => { state.draft = chainNames(); drawChain(); } }, 'Revert'),
          clearBtn,
          dirty() ? badge('unsaved changes', 'warn') : h('span', { class: 'muted small' }, `revision ${state.chain.revision}`)));
      addSel.addEventListener('change', () => {
        if (addSel.value) { state.draft = [...draft, addSel.value]; drawChain(); }
      });
    }

    function drawApply() {
      const t = state.target;
      if (!t) { clear(applyBox, h('p', { class: 'muted' }, 'No chain change yet.')); return; }
      const ds = state.dispatchers;
      const applied = ds.filter((d) => d.revision !== null && d.revision >= t.revision);
      const unknown = ds.filter((d) => d.revision === null);
      const all = ds.length > 0 && applied.length === ds.length;
      clear(applyBox,
        h('div', { class: `notice ${all ? 'ok' : 'warn'}`, 'data-applied': all ? 'true' : 'false', 'data-revision': t.revision },
          all
            ? h('strong', {}, `Revision ${t.revision} applied by every dispatcher (${applied.length}/${ds.length}).`)
            : h('strong', {}, ds.length
              ? `Revision ${t.revision}: applied by ${applied.length} of ${ds.length} dispatchers…`
              : `Revision ${t.revision}: no live dispatcher to apply it.`),
          t.at ? h('span', { class: 'muted small' }, ` saved ${fmtTime(t.at)}`) : null),
        ds.length ? h('ul', { class: 'apply-list' }, ds.map((d) => h('li', { 'data-instance': d.instance },
          d.revision !== null && d.revision >= t.revision ? '✓ ' : '… ',
          h('code', {}, d.instance), ` reports revision ${d.revision ?? 'unknown'}`))) : null,
        unknown.length ? h('p', { class: 'muted small' }, 'A dispatcher that reports no revision in its heartbeat cannot be confirmed.') : null);
    }

    function draw() {
      drawModels();
      drawChain();
      drawApply();
      clear(breakersBox, breakerTable(state.breakers));
    }

    main.append(
      h('div', { class: 'page-head' }, h('h1', {}, 'Models'),
        h('button', { type: 'button', class: 'primary', onclick: () => modelForm(null, afterModelChange) }, 'Add model')),
      problem,
      h('section', { class: 'panel', 'aria-labelledby': 'md-list' }, h('h2', { id: 'md-list' }, 'Configured models'), modelsBox),
      h('div', { class: 'grid-2' },
        h('section', { class: 'panel', 'aria-labelledby': 'md-chain' }, h('h2', { id: 'md-chain' }, 'Failover chain'),
          h('p', { class: 'muted small' }, 'The first model answers; the others take over in order when its breaker opens.'), chainBox),
        h('section', { class: 'panel', 'aria-labelledby': 'md-apply' }, h('h2', { id: 'md-apply' }, 'Applied by dispatchers'), applyBox)),
      h('section', { class: 'panel', 'aria-labelledby': 'md-br' }, h('h2', { id: 'md-br' }, 'Breakers and recent failures'), breakersBox));

    load().catch((err) => clear(problem, errorBox(err)));
    // Live: which dispatcher runs which revision, and breaker states, from the status API.
    return poll(async () => {
      const st = await api('/admin/status');
      state.dispatchers = (st.instances || []).filter((i) => i.service === 'dispatcher')
        .map((i) => ({ instance: i.instance, revision: chainRevisionOf(i.detail) }));
      const br = {};
      for (const b of Array.isArray(st.breakers) ? st.breakers : Object.values(st.breakers || {})) br[b.model] = b;
      const changed = JSON.stringify(Object.entries(br).map(([k, b]) => [k, b.state])) !== JSON.stringify(Object.entries(state.breakers).map(([k, b]) => [k, b.state]));
      state.breakers = br;
      drawApply();
      clear(breakersBox, breakerTable(st.breakers));
      // Redraw the table (and lose focus in it) only when a breaker state actually changed.
      if (changed) drawModels();
    }, 1500, (err) => clear(problem, errorBox(err)));
  },
};
