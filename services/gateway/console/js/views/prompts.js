// Prompts (admins): versions, a line diff between any two, hot activation and a canary share.

import { api } from '../api.js';
import { h, clear, badge, busy, empty, errorBox, field, fmtTime, select, table, toast } from '../ui.js';
import { diffLines } from '../diff.js';

function diffView(a, b) {
  if (!a || !b) return empty('Pick two versions to compare.');
  const lines = diffLines(a.text, b.text);
  const changed = lines.filter((l) => l.op !== ' ').length;
  return h('div', {},
    h('p', { class: 'muted small' }, changed ? `v${a.version} → v${b.version}: ${lines.filter((l) => l.op === '+').length} added, ${lines.filter((l) => l.op === '-').length} removed lines` : `v${a.version} and v${b.version} are identical.`),
    h('div', { class: 'diff', role: 'region', 'aria-label': `Diff of version ${a.version} and ${b.version}`, tabindex: 0 },
      lines.map((l) => h('div', { class: l.op === '+' ? 'add' : l.op === '-' ? 'del' : '' },
        h('span', { class: 'ln', 'aria-hidden': 'true' }, `${l.a ?? ''}`.padStart(3), ' ', `${l.b ?? ''}`.padStart(3), ' ', l.op),
        h('span', { class: 'sr-only' }, l.op === '+' ? 'added: ' : l.op === '-' ? 'removed: ' : ''),
        l.text))));
}

export default {
  title: 'Prompts',
  admin: true,
  render(main, { query }) {
    const state = { prompts: [], selected: query.get('name'), a: null, b: null };
    const problem = h('div');
    const listBox = h('nav', { 'aria-label': 'Prompts' });
    const detail = h('div');
    main.append(
      h('div', { class: 'page-head' }, h('h1', {}, 'Prompts'),
        h('button', { type: 'button', class: 'primary', onclick: () => newPrompt() }, 'New prompt')),
      problem,
      h('div', { class: 'side-layout' },
        h('section', { class: 'panel' }, h('h2', {}, 'All prompts'), listBox),
        detail));

    const current = () => state.prompts.find((p) => p.name === state.selected);

    async function load() {
      const body = await api('/admin/prompts', { query: { limit: 200 } });
      state.prompts = body.items;
      if (!current() && state.prompts.length) state.selected = state.prompts[0].name;
      const p = current();
      if (p && p.versions.length) {
        const byVersion = (v) => p.versions.find((x) => x.version === v);
        if (!state.a || !byVersion(state.a)) state.a = p.active_version || p.versions[0].version;
        if (!state.b || !byVersion(state.b)) state.b = p.versions[p.versions.length - 1].version;
      }
      draw();
    }

    function choose(name) {
      state.selected = name;
      state.a = null;
      state.b = null;
      history.replaceState(null, '', `/console/prompts?name=${encodeURIComponent(name)}`);
      load().catch((err) => clear(problem, errorBox(err)));
    }

    function newPrompt() {
      state.selected = null;
      const name = h('input', { required: true, pattern: '[A-Za-z0-9_.\\-]{1,100}', autocomplete: 'off' });
      const text = h('textarea', { rows: 10, required: true });
      const note = h('input', { maxlength: 500 });
      const err = h('div');
      const save = h('button', { type: 'submit', class: 'primary' }, 'Create prompt');
      const form = h('form', { class: 'panel' }, h('h2', {}, 'New prompt'),
        field('Name', name, 'letters, digits, . _ -'), field('Text (version 1)', text), field('Note', note), err,
        h('div', { class: 'actions' }, save));
      form.addEventListener('submit', (ev) => {
        ev.preventDefault();
        busy(save, async () => {
          clear(err);
          try {
            await api(`/admin/prompts/${encodeURIComponent(name.value.trim())}/versions`, { method: 'POST', body: { text: text.value, note: note.value || null } });
            toast(`Prompt ${name.value.trim()} created.`, 'ok');
            choose(name.value.trim());
          } catch (e) { clear(err, errorBox(e)); }
        });
      });
      clear(detail, form);
      name.focus();
    }

    async function activate(p, version, canary) {
      const body = { version };
      const keep = canary || (p.canary_version && p.canary_version !== version ? { canary_version: p.canary_version, canary_percent: p.canary_percent } : null);
      if (keep && keep.canary_percent) Object.assign(body, keep);
      await api(`/admin/prompts/${encodeURIComponent(p.name)}/activate`, { method: 'POST', body });
    }

    function draw() {
      clear(listBox, state.prompts.length
        ? h('ul', { class: 'chain' }, state.prompts.map((p) => h('li', {},
          h('a', { href: `/console/prompts?name=${encodeURIComponent(p.name)}`, 'aria-current': p.name === state.selected ? 'true' : null,
            onclick: (ev) => { ev.preventDefault(); choose(p.name); } }, p.name),
          p.active_version ? badge(`v${p.active_version}`, 'active') : badge('inactive', 'disabled'),
          p.canary_percent ? badge(`canary v${p.canary_version} ${p.canary_percent}%`, 'canary') : null)))
        : empty('No prompt yet.'));
      const p = current();
      if (!p) {
        if (!detail.querySelector('form')) clear(detail, empty('Create a prompt to version it here.'));
        return;
      }
      const versions = [...p.versions].reverse();
      const byVersion = (v) => p.versions.find((x) => x.version === v);
      const aSel = select(p.versions.map((v) => [String(v.version), `v${v.version}`]), String(state.a), { 'aria-label': 'Compare from version' });
      const bSel = select(p.versions.map((v) => [String(v.version), `v${v.version}`]), String(state.b), { 'aria-label': 'Compare to version' });
      const diffBox = h('div', {}, diffView(byVersion(state.a), byVersion(state.b)));
      const redrawDiff = () => { state.a = Number(aSel.value); state.b = Number(bSel.value); clear(diffBox, diffView(byVersion(state.a), byVersion(state.b))); };
      aSel.addEventListener('change', redrawDiff);
      bSel.addEventListener('change', redrawDiff);

      // Canary: a candidate version gets this share of new tasks.
      const candidates = p.versions.filter((v) => v.version !== p.active_version);
      const canaryVer = select(candidates.map((v) => [String(v.version), `v${v.version}`]), String(p.canary_version ?? (candidates.length ? candidates[candidates.length - 1].version : '')), { 'aria-label': 'Canary version' });
      const canaryPct = h('input', { type: 'number', min: 0, max: 100, step: 1, value: p.canary_percent || 10, 'aria-label': 'Canary percent', style: 'width: 6rem' });
      const canaryRange = h('input', { type: 'range', min: 0, max: 100, step: 1, value: p.canary_percent || 10, 'aria-label': 'Canary percent slider' });
      canaryRange.addEventListener('input', () => { canaryPct.value = canaryRange.value; });
      canaryPct.addEventListener('input', () => { canaryRange.value = canaryPct.value; });
      const canaryBtn = h('button', { type: 'button', class: 'primary', disabled: !candidates.length || !p.active_version }, p.canary_percent ? 'Update canary' : 'Start canary');
      canaryBtn.addEventListener('click', () => busy(canaryBtn, async () => {
        const pct = Math.max(0, Math.min(100, Math.round(Number(canaryPct.value))));
        await activate(p, p.active_version, { canary_version: Number(canaryVer.value), canary_percent: pct });
        toast(`Canary v${canaryVer.value} at ${pct} %.`, 'ok');
        await load();
      }));
      const stopBtn = h('button', { type: 'button', disabled: !p.canary_percent }, 'Stop canary');
      stopBtn.addEventListener('click', () => busy(stopBtn, async () => {
        await api(`/admin/prompts/${encodeURIComponent(p.name)}/activate`, { method: 'POST', body: { version: p.active_version } });
        toast('Canary stopped.', 'ok');
        await load();
      }));

      const latest = p.versions[p.versions.length - 1];
      const text = h('textarea', { rows: 8 }, latest ? latest.text : '');
      const note = h('input', { maxlength: 500, placeholder: 'what changed' });
      const activateNow = h('input', { type: 'checkbox', id: 'pv-activate' });
      const addErr = h('div');
      const addBtn = h('button', { type: 'submit', class: 'primary' }, 'Save new version');
      const addForm = h('form', {},
        field('Text', text), field('Note', note),
        h('div', { class: 'field inline' }, activateNow, h('label', { for: 'pv-activate' }, 'Activate it now')),
        addErr, h('div', { class: 'actions' }, addBtn));
      addForm.addEventListener('submit', (ev) => {
        ev.preventDefault();
        busy(addBtn, async () => {
          clear(addErr);
          try {
            const v = await api(`/admin/prompts/${encodeURIComponent(p.name)}/versions`, { method: 'POST', body: { text: text.value, note: note.value || null } });
            if (activateNow.checked) await activate(p, v.version);
            toast(`Version ${v.version} saved${activateNow.checked ? ' and active' : ''}.`, 'ok');
            state.b = v.version;
            await load();
          } catch (e) { clear(addErr, errorBox(e)); }
        });
      });

      clear(detail,
        h('section', { class: 'panel', 'aria-labelledby': 'pr-title' },
          h('h2', { id: 'pr-title' }, p.name, ' ', p.active_version ? badge(`active v${p.active_version}`, 'active') : badge('no active version', 'warn')),
          h('p', { class: 'muted small' }, `revision ${p.revision} · updated ${fmtTime(p.updated_at)}`),
          table([
            { label: 'Version', cell: (v) => h('strong', {}, `v${v.version}`) },
            { label: 'State', cell: (v) => [v.version === p.active_version ? badge('active', 'active') : null, v.version === p.canary_version && p.canary_percent ? badge(`canary ${p.canary_percent}%`, 'canary') : null] },
            { label: 'Note', class: 'wrap', cell: (v) => v.note || '—' },
            { label: 'By', cell: (v) => v.created_by || '—' },
            { label: 'Created', cell: (v) => fmtTime(v.created_at) },
            { label: 'Actions', cell: (v) => h('div', { class: 'actions' },
              h('button', { type: 'button', class: 'small', disabled: v.version === p.active_version, onclick: (ev) => busy(ev.currentTarget, async () => { await activate(p, v.version); toast(`v${v.version} is active.`, 'ok'); await load(); }) }, 'Activate'),
              h('button', { type: 'button', class: 'small', onclick: () => { aSel.value = String(p.active_version || v.version); bSel.value = String(v.version); redrawDiff(); diffBox.scrollIntoView({ block: 'nearest' }); } }, 'Diff vs active')) },
          ], versions, { caption: `Versions of ${p.name}` })),
        h('section', { class: 'panel', 'aria-labelledby': 'pr-diff' },
          h('h2', { id: 'pr-diff' }, 'Diff'),
          h('div', { class: 'toolbar' }, h('label', {}, 'From ', aSel), h('label', {}, 'to ', bSel)),
          diffBox),
        h('div', { class: 'grid-2' },
          h('section', { class: 'panel', 'aria-labelledby': 'pr-canary' },
            h('h2', { id: 'pr-canary' }, 'Canary'),
            h('p', { class: 'muted small' }, 'Send a share of new tasks to a candidate version.'),
            candidates.length
              ? h('div', {}, h('div', { class: 'toolbar' }, h('label', {}, 'Version ', canaryVer), h('label', {}, 'Share ', canaryPct, ' %')), canaryRange,
                h('div', { class: 'actions' }, canaryBtn, stopBtn))
              : empty('Add a second version to run a canary.')),
          h('section', { class: 'panel', 'aria-labelledby': 'pr-new' }, h('h2', { id: 'pr-new' }, 'New version'), addForm)));
    }

    load().catch((err) => clear(problem, errorBox(err)));
    return null;
  },
};
