import { api } from '../api.js';
import { h, clear, badge, empty, errorBox, field, fmtCost, fmtMs, fmtNum, fmtTime, durationOf, pager, select, table } from '../ui.js';

export const STATES = ['submitted', 'running', 'waiting', 'done', 'failed', 'timeout', 'rejected', 'cancelled', 'budget_exceeded'];

export default {
  title: 'Runs',
  render(main, { query }) {
    const problem = h('div');
    const body = h('div', { 'data-testid': 'task-list' }, h('p', { class: 'muted' }, 'Loading…'));
    const state = select([['', 'any state'], ...STATES.map((s) => [s, s])], query.get('status') || '', { name: 'status' });
    const sizes = ['10', '25', '50', '100'];
    const wanted = query.get('limit');
    const size = select(sizes.includes(wanted) || !wanted ? sizes : [...sizes, wanted], wanted || '25', { name: 'limit' });
    const pages = pager(
      (cursor) => api('/tasks', { query: { status: state.value, limit: size.value, cursor } }),
      (items) => {
        clear(problem);
        clear(body, items.length
          ? table([
            { label: 'Task', cell: (t) => h('a', { href: `/console/runs/${encodeURIComponent(t.id)}` }, h('code', {}, t.id)) },
            { label: 'State', cell: (t) => badge(t.status) },
            { label: 'Created', class: 'time', cell: (t) => fmtTime(t.created_at) },
            { label: 'Duration', class: 'num', cell: (t) => (t.started_at ? fmtMs(durationOf(t.started_at, t.finished_at)) : '—') },
            { label: 'Tokens', class: 'num', cell: (t) => fmtNum((t.usage?.prompt_tokens || 0) + (t.usage?.completion_tokens || 0)) },
            { label: 'Cost', class: 'num', cell: (t) => fmtCost(t.usage?.cost) },
            { label: 'User', cell: (t) => t.user_id || '—' },
            { label: 'Error', class: 'wrap', cell: (t) => t.error || '' },
          ], items, { caption: 'Tasks', rowAttrs: (t) => ({ 'data-task': t.id }) })
          : empty(state.value ? `No ${state.value} task.` : 'No run yet.', h('a', { class: 'button primary', href: '/console/runs/new' }, 'Start a run')));
      },
      (err) => clear(problem, errorBox(err)));
    const changed = () => {
      const q = new URLSearchParams();
      if (state.value) q.set('status', state.value);
      if (size.value !== '25') q.set('limit', size.value);
      history.replaceState(null, '', `/console/runs${q.size ? `?${q}` : ''}`);
      pages.reset();
    };
    state.addEventListener('change', changed);
    size.addEventListener('change', changed);
    main.append(
      h('div', { class: 'page-head' }, h('h1', {}, 'Runs'),
        h('a', { class: 'button primary', href: '/console/runs/new' }, 'New run')),
      h('div', { class: 'toolbar' }, field('State', state), field('Page size', size),
        h('div', { class: 'field' }, h('label', { 'aria-hidden': 'true' }, '\u00a0'), h('button', { type: 'button', onclick: () => pages.reload() }, 'Refresh'))),
      problem, body, pages.controls);
    pages.reset();
  },
};
