import { h, badge, fmtTime } from '../ui.js';
import { logTable, contains, equals } from './logtable.js';

export default {
  title: 'Guardrail events',
  admin: true,
  render(main) {
    logTable(main, {
      title: 'Guardrail events',
      path: '/admin/guardrail-events',
      emptyText: 'No guardrail has fired yet.',
      filters: [
        { name: 'action', label: 'Action', options: ['block', 'flag', 'redact', 'allow'], match: equals('action') },
        { name: 'tier', label: 'Tier', options: [['1', 'tier 1 (gateway)'], ['2', 'tier 2 (dispatcher)']], match: equals('tier') },
        { name: 'user_id', label: 'User', match: contains('user_id') },
        { name: 'q', label: 'Rule or reason', match: (r, v) => contains('rule')(r, v) || contains('reason')(r, v) },
      ],
      columns: [
        { label: 'When', class: 'time', cell: (r) => fmtTime(r.ts) },
        { label: 'Tier', class: 'num', cell: (r) => r.tier },
        { label: 'Action', cell: (r) => badge(r.action, r.action) },
        { label: 'Rule', cell: (r) => h('code', {}, r.rule || '—') },
        { label: 'Reason', class: 'wrap', cell: (r) => r.reason || '—' },
        { label: 'User', cell: (r) => r.user_id || '—' },
        { label: 'Where', class: 'wrap', cell: (r) => (r.task_id ? h('a', { href: `/console/runs/${encodeURIComponent(r.task_id)}` }, r.task_id) : h('code', {}, r.route || '—')) },
      ],
    });
  },
};
