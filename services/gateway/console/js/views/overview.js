import { api } from '../api.js';
import { h, clear, errorBox, empty, fmtNum, fmtCost, table, poll } from '../ui.js';

const STATES = ['submitted', 'running', 'waiting', 'done', 'failed', 'timeout', 'rejected', 'cancelled', 'budget_exceeded'];

function seconds(v) {
  if (v === null || v === undefined) return '—';
  return v < 1 ? `${Math.round(v * 1000)} ms` : `${Number(v).toFixed(2)} s`;
}

function card(label, value, testid) {
  return h('div', { class: 'card', 'data-testid': testid }, h('div', { class: 'label' }, label), h('div', { class: 'value' }, value));
}

function render(body, data) {
  const t = data.tasks || {};
  const byState = t.by_state || {};
  const max = Math.max(1, ...Object.values(byState));
  const states = [...STATES, ...Object.keys(byState).filter((s) => !STATES.includes(s))];
  const d = data.duration_s || {};
  const tokens = data.tokens || {};
  clear(body,
    h('div', { class: 'cards' },
      card(`Tasks (${data.window_hours || 24} h)`, fmtNum(t.total ?? 0), 'ov-total'),
      card('Failure rate', `${((data.failure_rate || 0) * 100).toFixed(1)} %`),
      card('Tokens', fmtNum(tokens.total ?? 0), 'ov-tokens'),
      card('Cost', fmtCost(data.cost ?? 0)),
      card('p50 duration', seconds(d.p50), 'ov-p50'),
      card('p95 duration', seconds(d.p95), 'ov-p95')),
    h('div', { class: 'grid-2' },
      h('section', { class: 'panel', 'aria-labelledby': 'ov-states' },
        h('h2', { id: 'ov-states' }, 'Tasks by state'),
        t.total ? h('div', { class: 'bars' }, states.map((s) => h('div', { class: 'bar' },
          h('span', {}, s),
          h('div', { class: 'track', role: 'img', 'aria-label': `${s}: ${byState[s] || 0}` },
            h('div', { class: `fill ${s}`, style: `width:${((byState[s] || 0) / max) * 100}%` })),
          h('span', { class: 'num' }, fmtNum(byState[s] || 0)))))
          : empty('No tasks in the last 24 hours.', h('a', { href: '/console/runs/new' }, 'Start a run'))),
      h('section', { class: 'panel', 'aria-labelledby': 'ov-tok' },
        h('h2', { id: 'ov-tok' }, 'Tokens and cost'),
        h('dl', { class: 'kv' },
          h('dt', {}, 'Prompt tokens'), h('dd', {}, fmtNum(tokens.prompt ?? 0)),
          h('dt', {}, 'Completion tokens'), h('dd', {}, fmtNum(tokens.completion ?? 0)),
          h('dt', {}, 'Cost'), h('dd', {}, fmtCost(data.cost ?? 0)),
          h('dt', {}, 'Tasks per hour'), h('dd', {}, t.per_hour ?? '—'),
          h('dt', {}, 'Durations measured'), h('dd', {}, fmtNum(d.count ?? 0))),
        h('h3', {}, 'Top failing nodes'),
        (data.top_failing_nodes || []).length
          ? table([
            { label: 'Node', cell: (r) => h('code', {}, r.node_id) },
            { label: 'Kind', cell: (r) => r.kind || '—' },
            { label: 'Failures', class: 'num', cell: (r) => fmtNum(r.failures) },
          ], data.top_failing_nodes, { caption: 'Top failing nodes' })
          : empty('No node failed in the last 24 hours.'))));
}

export default {
  title: 'Overview',
  admin: true,
  render(main) {
    const body = h('div', { 'aria-live': 'polite' }, h('p', { class: 'muted' }, 'Loading…'));
    const problem = h('div');
    main.append(h('div', { class: 'page-head' }, h('h1', {}, 'Overview'), h('span', { class: 'muted small' }, 'updates every 5 s')), problem, body);
    return poll(async () => {
      render(body, await api('/admin/overview'));
      clear(problem);
    }, 5000, (err) => clear(problem, errorBox(err)));
  },
};
