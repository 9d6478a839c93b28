// A paginated, filterable table over a newest-first admin list (`{items, next_cursor}`).
// Filters go to the server as query parameters and are also applied to the rows of the page,
// so the table is right whether or not the server filters.

import { api } from '../api.js';
import { h, clear, empty, errorBox, field, pager, select, table } from '../ui.js';

/**
 * filters: [{name, label, options?: [[value,label],…], match(row, value) → bool}]
 */
export function logTable(main, { title, path, columns, filters, emptyText }) {
  const problem = h('div');
  const body = h('div', { 'aria-live': 'polite' }, h('p', { class: 'muted' }, 'Loading…'));
  const inputs = {};
  const controls = filters.map((f) => {
    const input = f.options
      ? select([['', 'any'], ...f.options], '', { name: f.name })
      : h('input', { name: f.name, type: 'search', placeholder: f.placeholder || '' });
    inputs[f.name] = input;
    return field(f.label, input);
  });
  const size = select(['25', '50', '100', '200'], '50', { name: 'limit' });
  let rows = [];

  const values = () => Object.fromEntries(Object.entries(inputs).map(([k, el]) => [k, el.value.trim()]).filter(([, v]) => v));

  function draw() {
    const active = values();
    const shown = rows.filter((r) => filters.every((f) => !active[f.name] || f.match(r, active[f.name])));
    clear(body,
      shown.length
        ? table(columns, shown, { caption: title })
        : empty(rows.length ? 'No row on this page matches the filters. Try older pages or clear a filter.' : emptyText),
      Object.keys(active).length && rows.length ? h('p', { class: 'muted small' }, `${shown.length} of ${rows.length} rows on this page match.`) : null);
  }

  const pages = pager(
    (cursor) => api(path, { query: { limit: size.value, cursor, ...values() } }),
    (items) => { rows = items; clear(problem); draw(); },
    (err) => clear(problem, errorBox(err)));

  const form = h('form', { class: 'toolbar', role: 'search', 'aria-label': `Filter ${title}` },
    controls, field('Page size', size),
    h('div', { class: 'field' }, h('label', { 'aria-hidden': 'true' }, '\u00a0'), h('button', { type: 'submit', class: 'primary' }, 'Apply')),
    h('div', { class: 'field' }, h('label', { 'aria-hidden': 'true' }, '\u00a0'), h('button', { type: 'button', onclick: () => { form.reset(); pages.reset(); } }, 'Clear')));
  form.addEventListener('submit', (ev) => { ev.preventDefault(); pages.reset(); });
  for (const el of Object.values(inputs)) el.addEventListener('input', draw);
  size.addEventListener('change', () => pages.reset());

  main.append(
    h('div', { class: 'page-head' }, h('h1', {}, title), h('span', { class: 'muted small' }, 'newest first'),
      h('button', { type: 'button', onclick: () => pages.reload() }, 'Refresh')),
    form, problem, body, pages.controls);
  pages.reset();
}

export const contains = (field) => (row, v) => String(row[field] ?? '').toLowerCase().includes(v.toLowerCase());
export const equals = (field) => (row, v) => String(row[field] ?? '') === v;
