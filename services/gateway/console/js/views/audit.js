import { h, badge, fmtTime } from '../ui.js';
import { logTable, contains, equals } from './logtable.js';

export default {
  title: 'Audit log',
  admin: true,
  render(main) {
    logTable(main, {
      title: 'Audit log',
      path: '/admin/audit',
      emptyText: 'No change has been recorded yet.',
      filters: [
        { name: 'user_id', label: 'User', match: contains('user_id') },
        { name: 'method', label: 'Method', options: ['POST', 'PUT', 'DELETE'], match: equals('method') },
        { name: 'outcome', label: 'Outcome', options: ['ok', 'rejected', 'denied', 'error'], match: equals('outcome') },
        { name: 'route', label: 'Route or target', placeholder: 'e.g. /admin/models', match: (r, v) => contains('route')(r, v) || contains('target')(r, v) },
      ],
      columns: [
        { label: 'When', class: 'time', cell: (r) => fmtTime(r.ts) },
        { label: 'User', cell: (r) => r.user_id || '—' },
        { label: 'Method', cell: (r) => h('code', {}, r.method) },
        { label: 'Route', class: 'wrap', cell: (r) => h('code', {}, r.route) },
        { label: 'Target', class: 'wrap', cell: (r) => r.target || '—' },
        { label: 'Status', class: 'num', cell: (r) => r.status },
        { label: 'Outcome', cell: (r) => badge(r.outcome, r.outcome === 'ok' ? 'ok' : r.outcome) },
        { label: 'Request', cell: (r) => h('code', { class: 'small' }, r.request_id || '—') },
      ],
    });
  },
};
