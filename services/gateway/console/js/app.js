// The console shell: login gate, navigation and a small history router under /console/.
// Each page is a module in views/ exporting {title, admin?, render(main, params) → cleanup?}.

import { session, logout, setUnauthorizedHandler } from './api.js';
import { h, clear, errorBox } from './ui.js';

export const BASE = '/console';

const ROUTES = [
  { path: /^\/?$/, view: null },
  { path: /^\/login$/, view: 'login', public: true },
  { path: /^\/overview$/, view: 'overview' },
  { path: /^\/status$/, view: 'status' },
  { path: /^\/models$/, view: 'models' },
  { path: /^\/prompts$/, view: 'prompts' },
  { path: /^\/mcp$/, view: 'mcp' },
  { path: /^\/audit$/, view: 'audit' },
  { path: /^\/guardrail$/, view: 'guardrail' },
  { path: /^\/runs$/, view: 'runs' },
  { path: /^\/runs\/new$/, view: 'submit' },
  { path: /^\/runs\/(?<id>[^/]+)$/, view: 'run' },
  { path: /^\/chat$/, view: 'chat' },
  { path: /^\/chat\/(?<id>[^/]+)$/, view: 'chat' },
  { path: /^\/kb$/, view: 'kb' },
  { path: /^\/kb\/(?<name>[^/]+)$/, view: 'kbdetail' },
];

const NAV = [
  { href: '/overview', label: 'Overview', admin: true },
  { href: '/status', label: 'Status', admin: true },
  { href: '/models', label: 'Models', admin: true },
  { href: '/prompts', label: 'Prompts', admin: true },
  { href: '/mcp', label: 'MCP servers', admin: true },
  { href: '/audit', label: 'Audit', admin: true },
  { href: '/guardrail', label: 'Guardrail', admin: true },
  { href: '/chat', label: 'Chat' },
  { href: '/runs', label: 'Runs' },
  { href: '/kb', label: 'Knowledge' },
];

let cleanup = null;
let firstRender = true;

export function navigate(path, { replace = false } = {}) {
  const url = BASE + (path.startsWith('/') ? path : `/${path}`);
  if (replace) history.replaceState(null, '', url);
  else history.pushState(null, '', url);
  route();
}

function defaultPath() {
  return session.user && session.user.admin ? '/overview' : '/runs';
}

function currentPath() {
  const p = location.pathname.startsWith(BASE) ? location.pathname.slice(BASE.length) : '/';
  return p.replace(/\/+$/, '') || '/';
}

function shell(active) {
  const user = session.user;
  const nav = h('nav', { class: 'nav', 'aria-label': 'Main' },
    NAV.filter((n) => !n.admin || (user && user.admin)).map((n) => h('a', {
      href: BASE + n.href,
      'aria-current': active.startsWith(n.href) ? 'page' : null,
    }, n.label)));
  return h('header', { class: 'topbar' },
    h('a', { class: 'skip', href: '#main' }, 'Skip to content'),
    h('a', { class: 'brand', href: `${BASE}/` }, 'Agentix'),
    nav,
    h('div', { class: 'who' },
      h('span', { 'data-testid': 'whoami' }, user ? user.name : '', user && user.admin ? [' ', h('span', { class: 'badge' }, 'admin')] : null),
      h('button', { type: 'button', class: 'link', onclick: () => { logout(); navigate('/login'); } }, 'Log out')));
}

async function route() {
  if (cleanup) { try { cleanup(); } catch { /* a page failing to stop must not block the next */ } }
  cleanup = null;
  let path = currentPath();
  const match = ROUTES.map((r) => ({ r, m: path.match(r.path) })).find((x) => x.m);
  const root = document.getElementById('app');
  if (!session.token && !(match && match.r.public)) {
    const next = path === '/' ? '' : `?next=${encodeURIComponent(path)}`;
    history.replaceState(null, '', `${BASE}/login${next}`);
    path = '/login';
    return route();
  }
  if (match && match.r.view === null) {
    history.replaceState(null, '', BASE + defaultPath());
    return route();
  }
  const main = h('main', { id: 'main', tabindex: '-1' });
  clear(root, match && match.r.public ? null : shell(path), main);
  if (!match) {
    main.append(h('h1', {}, 'Not found'), h('p', {}, 'No page here. ', h('a', { href: `${BASE}/` }, 'Go home')));
    return undefined;
  }
  try {
    const mod = await import(`./views/${match.r.view}.js`);
    const view = mod.default;
    document.title = `${view.title} · Agentix`;
    if (view.admin && !(session.user && session.user.admin)) {
      main.append(h('h1', {}, view.title), errorBox(new Error('This page is for administrators.')));
      return undefined;
    }
    const params = { ...(match.m.groups || {}), query: new URLSearchParams(location.search) };
    cleanup = (await view.render(main, params)) || null;
    if (!firstRender) main.focus({ preventScroll: true });
  } catch (err) {
    main.append(errorBox(err));
  }
  firstRender = false;
  return undefined;
}

// Same-origin console links stay in the page (Ctrl/⌘-click still opens a new tab).
document.addEventListener('click', (ev) => {
  const a = ev.target.closest && ev.target.closest('a[href]');
  if (!a || a.getAttribute('href').startsWith('#') || ev.defaultPrevented || ev.button !== 0 || ev.metaKey || ev.ctrlKey || ev.shiftKey || ev.altKey) return;
  const url = new URL(a.href, location.href);
  if (url.origin !== location.origin || !url.pathname.startsWith(BASE) || a.target) return;
  ev.preventDefault();
  history.pushState(null, '', url.pathname + url.search);
  route();
});
window.addEventListener('popstate', route);

setUnauthorizedHandler(() => {
  session.clear();
  const path = currentPath();
  history.replaceState(null, '', `${BASE}/login?expired=1&next=${encodeURIComponent(path)}`);
  route();
});

route();
