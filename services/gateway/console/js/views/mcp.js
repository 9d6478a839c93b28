// MCP servers (admins): register external MCP servers whose tools Agentix serves as
// `<server>.<tool>`, with write-only headers, tool filters, and what the tools-go bridges report
// about each (connected, tools, calls, errors, latency), refreshed live.

import { api } from '../api.js';
import { h, clear, badge, busy, dialog, empty, errorBox, field, fmtNum, table, toast, poll } from '../ui.js';

const STATUS_EVERY_MS = 2000;

/** "Name: value" lines → {Name: value}; a line without a colon is an error. */
export function parseHeaders(text) {
  const headers = {};
  for (const [i, raw] of text.split('\n').entries()) {
    const line = raw.trim();
    if (!line) continue;
    const at = line.indexOf(':');
    if (at < 1) throw new Error(`Header line ${i + 1} is not "Name: value".`);
    headers[line.slice(0, at).trim()] = line.slice(at + 1).trim();
  }
  return headers;
}

/** "a, b c" → ['a', 'b', 'c'] (commas or spaces), duplicates dropped. */
export function splitNames(text) {
  return [...new Set(String(text || '').split(/[\s,]+/).map((s) => s.trim()).filter(Boolean))];
}

/** What to show for a server: its bridges' report from /admin/status, or why there is none. */
export function serverState(server, statusByName) {
  const s = statusByName[server.name];
  if (!server.enabled) return { state: 'disabled', kind: 'disabled', s };
  if (!s || s.state === 'disabled') return { state: 'connecting', kind: 'running', s: null };
  const kind = { connected: 'ok', degraded: 'warn', down: 'failed' }[s.state] || 'running';
  return { state: s.state, kind, s };
}

/** The PUT/POST body: headers only when typed (leaving them out keeps the stored ones). */
export function serverBody(server, changes = {}) {
  const body = {
    name: server.name, url: server.url, enabled: server.enabled,
    allow_tools: server.allow_tools || [], deny_tools: server.deny_tools || [], high_risk_tools: server.high_risk_tools || [],
    ...changes,
  };
  if (body.headers === undefined) delete body.headers;
  return body;
}

function serverForm(existing, onSaved) {
  const s = existing || { enabled: true };
  const name = h('input', { name: 'name', value: s.name || '', required: true, pattern: '[a-z0-9][a-z0-9_\\-]{0,62}', autocomplete: 'off' });
  const url = h('input', { name: 'url', type: 'url', value: s.url || '', required: true, placeholder: 'https://…/mcp' });
  const headers = h('textarea', {
    name: 'headers', rows: 3, autocomplete: 'off', spellcheck: 'false',
    placeholder: existing ? (existing.has_headers ? 'stored — leave empty to keep them' : 'none stored') : 'Authorization: Bearer …',
  });
  const clearHeaders = h('input', { name: 'clear_headers', type: 'checkbox', id: 'mcp-clear-headers' });
  const allow = h('input', { name: 'allow_tools', value: (s.allow_tools || []).join(', '), autocomplete: 'off' });
  const deny = h('input', { name: 'deny_tools', value: (s.deny_tools || []).join(', '), autocomplete: 'off' });
  const highRisk = h('input', { name: 'high_risk_tools', value: (s.high_risk_tools || []).join(', '), autocomplete: 'off' });
  const enabled = h('input', { name: 'enabled', type: 'checkbox', id: 'mcp-enabled', checked: s.enabled !== false });
  const problem = h('div');
  const save = h('button', { type: 'submit', class: 'primary', 'data-action': 'save-mcp' }, existing ? 'Save server' : 'Add server');
  const form = h('form', { class: 'model-form' },
    h('div', { class: 'form-grid' },
      field('Name', name, 'its tools are named <name>.<tool>; a-z, 0-9, _ and -'),
      field('URL', url, 'the server\'s streamable HTTP endpoint'),
      field('Headers', headers, 'one "Name: value" per line; write-only: never shown again'),
      field('Allowed tools', allow, 'comma-separated; empty: every tool'),
      field('Denied tools', deny, 'never served'),
      field('High-risk tools', highRisk, 'a node must allow them explicitly')),
    existing && existing.has_headers
      ? h('div', { class: 'field inline' }, clearHeaders, h('label', { for: 'mcp-clear-headers' }, 'Remove the stored headers'))
      : null,
    h('div', { class: 'field inline' }, enabled, h('label', { for: 'mcp-enabled' }, 'Enabled')),
    problem,
    h('div', { class: 'actions' }, save, h('button', { type: 'button', onclick: () => dlg.close() }, 'Cancel')));
  const dlg = dialog(existing ? `Edit MCP server ${existing.name}` : 'Add an MCP server', form);
  form.addEventListener('submit', (ev) => {
    ev.preventDefault();
    busy(save, async () => {
      clear(problem);
      try {
        const typed = headers.value.trim() ? parseHeaders(headers.value) : undefined;
        const body = serverBody({
          name: name.value.trim(), url: url.value.trim(), enabled: enabled.checked,
          allow_tools: splitNames(allow.value), deny_tools: splitNames(deny.value), high_risk_tools: splitNames(highRisk.value),
        }, { headers: clearHeaders.checked ? {} : typed });
        const out = existing
          ? await api(`/admin/mcp-servers/${encodeURIComponent(existing.id)}`, { method: 'PUT', body })
          : await api('/admin/mcp-servers', { method: 'POST', body });
        headers.value = '';
        dlg.close();
        toast(`MCP server ${out.name} saved.`, 'ok');
        onSaved(out);
      } catch (err) {
        clear(problem, errorBox(err));
      }
    });
  });
}

export default {
  title: 'MCP servers',
  admin: true,
  render(main) {
    const state = { servers: [], status: {} };
    const problem = h('div');
    const listBox = h('div', { 'data-testid': 'mcp-servers' }, h('p', { class: 'muted' }, 'Loading…'));

    function draw() {
      if (!state.servers.length) {
        clear(listBox, empty('No MCP server registered. Add one: its tools become Agentix tools named <server>.<tool>.'));
        return;
      }
      clear(listBox, table([
        { label: 'Name', cell: (s) => h('strong', {}, s.name) },
        { label: 'URL', class: 'wrap', cell: (s) => h('code', {}, s.url) },
        { label: 'State', cell: (s) => { const v = serverState(s, state.status); return h('span', { 'data-state': v.state }, badge(v.state, v.kind)); } },
        { label: 'Tools', class: 'num', cell: (s) => { const v = serverState(s, state.status); return h('span', { 'data-tools': '' }, v.s ? fmtNum(v.s.tools) : '—'); } },
        { label: 'Calls', class: 'num', cell: (s) => { const v = serverState(s, state.status); return v.s ? `${fmtNum(v.s.calls || 0)} (${fmtNum(v.s.errors || 0)} failed)` : '—'; } },
        { label: 'Mean latency', class: 'num', cell: (s) => { const v = serverState(s, state.status); return v.s && v.s.avg_latency_ms != null ? `${v.s.avg_latency_ms.toFixed(1)} ms` : '—'; } },
        { label: 'Last error', class: 'wrap', cell: (s) => { const v = serverState(s, state.status); return (v.s && v.s.last_error) || '—'; } },
        { label: 'Headers', cell: (s) => (s.has_headers ? badge('stored', 'ok') : h('span', { class: 'muted' }, 'none')) },
        { label: 'Actions', cell: (s) => h('div', { class: 'actions' },
          h('button', { type: 'button', class: 'small', 'aria-label': `Edit ${s.name}`, onclick: () => serverForm(s, load) }, 'Edit'),
          h('button', {
            type: 'button', class: 'small', 'aria-label': `${s.enabled ? 'Disable' : 'Enable'} ${s.name}`,
            onclick: (ev) => busy(ev.currentTarget, async () => {
              await api(`/admin/mcp-servers/${encodeURIComponent(s.id)}`, { method: 'PUT', body: serverBody(s, { enabled: !s.enabled }) });
              toast(`${s.name} ${s.enabled ? 'disabled' : 'enabled'}.`, 'ok');
              await load();
            }),
          }, s.enabled ? 'Disable' : 'Enable'),
          h('button', {
            type: 'button', class: 'small danger', 'aria-label': `Delete ${s.name}`,
            onclick: (ev) => {
              if (!window.confirm(`Delete the MCP server ${s.name}? Its tools disappear from every agent.`)) return;
              busy(ev.currentTarget, async () => { await api(`/admin/mcp-servers/${encodeURIComponent(s.id)}`, { method: 'DELETE' }); toast(`${s.name} deleted.`, 'ok'); await load(); });
            },
          }, 'Delete')) },
      ], state.servers, { caption: 'MCP servers', rowAttrs: (s) => ({ 'data-server': s.name }) }));
    }

    async function load() {
      const items = [];
      let cursor = null;
      do {
        const page = await api(`/admin/mcp-servers?limit=200${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`);
        items.push(...(page.items || []));
        cursor = page.next_cursor;
      } while (cursor);
      state.servers = items;
      draw();
    }

    async function refreshStatus() {
      const data = await api('/admin/status');
      state.status = Object.fromEntries((data.mcp_servers || []).map((s) => [s.name, s]));
      draw();
    }

    const add = h('button', { type: 'button', class: 'primary', 'data-action': 'add-mcp', onclick: () => serverForm(null, load) }, 'Add server');
    main.append(h('div', { class: 'page-head' }, h('h1', {}, 'MCP servers'), add), problem,
      h('section', { class: 'panel' }, h('h2', {}, 'Registered servers'), listBox));
    load().catch((err) => clear(problem, errorBox(err)));
    return poll(refreshStatus, STATUS_EVERY_MS, (err) => clear(problem, errorBox(err)));
  },
};
