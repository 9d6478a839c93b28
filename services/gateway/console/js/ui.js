// Small DOM helpers. Text always goes in as text nodes (never innerHTML), so nothing a server or
// a model returns can inject markup.

import { ApiError } from './api.js';

/** h('button', {class: 'primary', onclick: fn}, 'Save') → element. */
export function h(tag, attrs = {}, ...children) {
  const el = tag === 'svg' || attrs.svg ? document.createElementNS('http://www.w3.org/2000/svg', tag) : document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === undefined || value === null || value === false || key === 'svg') continue;
    if (key.startsWith('on') && typeof value === 'function') el.addEventListener(key.slice(2), value);
    else if (key === 'dataset') Object.assign(el.dataset, value);
    else if (key === 'value' && 'value' in el) el.value = value;
    else if (key === 'checked' || key === 'selected' || key === 'disabled') el[key] = Boolean(value);
    else el.setAttribute(key, value === true ? '' : String(value));
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
}

export function clear(el, ...children) {
  el.replaceChildren();
  append(el, children);
  return el;
}

// ---------------------------------------------------------------- formatting

export function fmtTime(value) {
  if (!value) return '—';
  const d = new Date(value);
  return Number.isNaN(d.getTime()) ? String(value) : d.toLocaleString();
}

export function fmtAge(seconds) {
  if (seconds === null || seconds === undefined || Number.isNaN(seconds)) return '—';
  if (seconds < 60) return `${seconds.toFixed(1)} s`;
  if (seconds < 3600) return `${Math.floor(seconds / 60)} min ${Math.floor(seconds % 60)} s`;
  return `${(seconds / 3600).toFixed(1)} h`;
}

export function fmtMs(ms) {
  if (ms === null || ms === undefined || Number.isNaN(Number(ms))) return '—';
  const n = Number(ms);
  return n < 1000 ? `${Math.round(n)} ms` : `${(n / 1000).toFixed(2)} s`;
}

export function fmtNum(n) {
  return n === null || n === undefined ? '—' : Number(n).toLocaleString();
}

export function fmtCost(c) {
  return c === null || c === undefined ? '—' : `$${Number(c).toFixed(4)}`;
}

export function fmtJson(value) {
  if (typeof value === 'string') return value;
  try { return JSON.stringify(value, null, 2); } catch { return String(value); }
}

export function durationOf(start, end) {
  if (!start) return null;
  return (end ? new Date(end) : new Date()) - new Date(start);
}

// ---------------------------------------------------------------- building blocks

export function badge(text, kind = text) {
  return h('span', { class: `badge badge-${String(kind).replace(/[^a-z0-9_-]/gi, '')}` }, text);
}

export function empty(message, ...extra) {
  return h('div', { class: 'empty', role: 'status' }, h('p', {}, message), ...extra);
}

/** A problem+json error as a readable box: its `detail` and each validation item. */
export function errorBox(err) {
  const detail = err instanceof ApiError ? err.message : String(err && err.message ? err.message : err);
  const items = err instanceof ApiError ? err.errors : [];
  return h('div', { class: 'error', role: 'alert' },
    h('strong', {}, err instanceof ApiError && err.status ? `${err.status} ${err.problem.title || 'Error'}: ` : 'Error: '),
    detail,
    items.length ? h('ul', {}, items.map((e) => h('li', {}, e.code ? h('code', {}, e.code) : null, ' ', problemItemText(e)))) : null,
    err instanceof ApiError && err.requestId ? h('div', { class: 'muted small' }, `request ${err.requestId}`) : null);
}

/**
 * One problem item as a sentence: where (node, edge, field, position), then the message. A
 * place the message already names is not said twice ("node b: config.prompt: node 'b':
 * config.prompt: required" reads "node 'b': config.prompt: required").
 */
export function problemItemText(e) {
  const message = e.message || '';
  const says = (text) => message.includes(text);
  const has = (v) => v !== undefined && v !== null && v !== '';
  // A DSL error that names its node or edge is about that place: its field is said with it.
  const namesNode = has(e.node_id) && says(`'${e.node_id}'`);
  const namesEdge = has(e.edge_index) && says(`[${e.edge_index}]`);
  const where = [
    has(e.node_id) && !namesNode ? `node ${e.node_id}` : null,
    has(e.edge_index) && !namesEdge ? `edge ${e.edge_index}` : null,
    has(e.field) && !namesNode && !namesEdge && !says(`${e.field}:`) ? e.field : null,
    has(e.position) && !says(`character ${e.position}`) ? `at character ${e.position}` : null,
  ].filter(Boolean);
  return where.length ? `${where.join(', ')}: ${message}` : message;
}

let toastHost = null;
export function toast(message, kind = 'info') {
  if (!toastHost) {
    toastHost = h('div', { class: 'toasts', 'aria-live': 'polite' });
    document.body.append(toastHost);
  }
  const el = h('div', { class: `toast toast-${kind}`, role: kind === 'error' ? 'alert' : 'status' }, message);
  toastHost.append(el);
  while (toastHost.children.length > 3) toastHost.firstChild.remove();
  setTimeout(() => el.remove(), kind === 'error' ? 8000 : 4000);
}

/**
 * A table: columns are [{label, cell: row => node|string, class?}]. Wrapped so it scrolls
 * sideways on a narrow window instead of squeezing.
 */
export function table(columns, rows, { caption, rowAttrs } = {}) {
  return h('div', { class: 'table-wrap' },
    h('table', {},
      caption ? h('caption', { class: 'sr-only' }, caption) : null,
      h('thead', {}, h('tr', {}, columns.map((c) => h('th', { scope: 'col', class: c.class }, c.label)))),
      h('tbody', {}, rows.map((row) => h('tr', rowAttrs ? rowAttrs(row) : {},
        columns.map((c) => h('td', { class: c.class, 'data-label': c.label }, c.cell(row))))))));
}

/** A labelled form field. */
export function field(label, input, hint) {
  const id = input.id || `f-${Math.random().toString(36).slice(2, 9)}`;
  input.id = id;
  return h('div', { class: 'field' }, h('label', { for: id }, label), input, hint ? h('div', { class: 'hint' }, hint) : null);
}

export function select(options, value, attrs = {}) {
  return h('select', attrs, options.map((o) => {
    const [v, label] = Array.isArray(o) ? o : [o, o];
    return h('option', { value: v, selected: v === value }, label);
  }));
}

/** A modal <dialog>: Esc closes it, focus stays inside (native behaviour). */
export function dialog(title, body, { onClose } = {}) {
  const dlg = h('dialog', { class: 'dialog', 'aria-label': title },
    h('header', {}, h('h2', {}, title), h('button', { type: 'button', class: 'icon', 'aria-label': 'Close', onclick: () => dlg.close() }, '×')),
    body);
  dlg.addEventListener('close', () => { dlg.remove(); if (onClose) onClose(); });
  document.body.append(dlg);
  dlg.showModal();
  return dlg;
}

/**
 * Poll `fn` every `ms` after the previous call finished; returns stop(). Errors go to `onError`
 * and polling continues (the server may come back).
 */
export function poll(fn, ms, onError = () => {}) {
  let stopped = false;
  let timer = null;
  const tick = async () => {
    try { await fn(); } catch (err) { if (!stopped) onError(err); }
    if (!stopped) timer = setTimeout(tick, ms);
  };
  tick();
  return () => { stopped = true; clearTimeout(timer); };
}

/**
 * Cursor paging: keeps the cursors of the pages seen so Prev works too.
 * `load(cursor)` must return `{items, next_cursor}`; a failed load goes to `onError`.
 */
export function pager(load, render, onError = (err) => toast(err.message, 'error')) {
  const stack = [null];
  let index = 0;
  let next = null;
  const prevBtn = h('button', { type: 'button', onclick: () => go(index - 1) }, '← Newer');
  const nextBtn = h('button', { type: 'button', onclick: () => go(index + 1) }, 'Older →');
  const info = h('span', { class: 'muted' });
  const controls = h('nav', { class: 'pager', 'aria-label': 'Pages' }, prevBtn, info, nextBtn);
  async function go(i) {
    const cursor = i > index ? next : stack[i];
    let page;
    try {
      page = await load(cursor);
    } catch (err) {
      onError(err);
      return;
    }
    stack[i] = cursor;
    index = i;
    next = page.next_cursor || null;
    prevBtn.disabled = index === 0;
    nextBtn.disabled = !next;
    info.textContent = `page ${index + 1}`;
    controls.hidden = index === 0 && !next; // one page only: no paging controls
    render(page.items || []);
  }
  return { controls, reset: () => { stack.length = 1; return go(0); }, reload: () => go(index) };
}

/** Run an async action from a button: disables it meanwhile and shows errors as a toast. */
export async function busy(button, action) {
  const was = button.disabled;
  button.disabled = true;
  button.setAttribute('aria-busy', 'true');
  try {
    return await action();
  } catch (err) {
    toast(err.message || String(err), 'error');
    return undefined;
  } finally {
    button.disabled = was;
    button.removeAttribute('aria-busy');
  }
}
