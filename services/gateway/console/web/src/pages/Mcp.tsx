// MCP servers (admins): register external MCP servers whose tools Agentix serves as
// `<server>.<tool>`, with write-only headers, tool filters, and what the tools-go bridges report
// about each (connected, tools, calls, errors, latency), refreshed live.

import { useCallback, useEffect, useState } from 'react';
import { api } from '../lib/api';
import { fmtNum } from '../lib/format';
import { Badge, BusyButton, DeleteButton, Dialog, Empty, ErrorBox, Field, Loading, PageHead, Table, toast, usePoll, useTitle } from '../components/ui';

const STATUS_EVERY_MS = 2000;

/** "Name: value" lines → {Name: value}; a line without a colon is an error. */
export function parseHeaders(text: string): Record<string, string> {
  const headers: Record<string, string> = {};
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
export function splitNames(text: string | null | undefined): string[] {
  return [...new Set(String(text || '').split(/[\s,]+/).map((s) => s.trim()).filter(Boolean))];
}

/** What to show for a server: its bridges' report from /admin/status, or why there is none. */
export function serverState(server: any, statusByName: Record<string, any>) {
  const s = statusByName[server.name];
  if (!server.enabled) return { state: 'disabled', kind: 'disabled', s };
  if (!s || s.state === 'disabled') return { state: 'connecting', kind: 'running', s: null };
  const kind = ({ connected: 'ok', degraded: 'warn', down: 'failed' } as Record<string, string>)[s.state] || 'running';
  return { state: s.state as string, kind, s };
}

/** The PUT/POST body: headers only when typed (leaving them out keeps the stored ones). */
export function serverBody(server: any, changes: Record<string, unknown> = {}) {
  // A PUT replaces the registration: what the form does not edit (a stdio server's command, the
  // transport, sampling…) goes back as it is.
  const body: Record<string, unknown> = {
    name: server.name, transport: server.transport, url: server.url || undefined, enabled: server.enabled,
    command: server.command || undefined, args: server.args, network: server.network, read_paths: server.read_paths,
    memory_mb: server.memory_mb, sampling: server.sampling,
    allow_tools: server.allow_tools || [], deny_tools: server.deny_tools || [], high_risk_tools: server.high_risk_tools || [],
    ...changes,
  };
  for (const key of Object.keys(body)) if (body[key] === undefined) delete body[key];
  return body;
}

function ServerForm({ existing, onSaved, onClose }: { existing: any; onSaved: () => void; onClose: () => void }) {
  const s = existing || { enabled: true };
  const [v, setV] = useState({
    name: s.name || '', url: s.url || '', headers: '', clearHeaders: false,
    allow: (s.allow_tools || []).join(', '), deny: (s.deny_tools || []).join(', '), highRisk: (s.high_risk_tools || []).join(', '), enabled: s.enabled !== false,
  });
  const [problem, setProblem] = useState<unknown>(null);
  const [busy, setBusy] = useState(false);
  const set = (k: string) => (ev: React.ChangeEvent<HTMLInputElement | HTMLTextAreaElement>) => setV({ ...v, [k]: ev.target.type === 'checkbox' ? (ev.target as HTMLInputElement).checked : ev.target.value });
  return (
    <Dialog title={existing ? `Edit MCP server ${existing.name}` : 'Add an MCP server'} onClose={onClose}>
      <form className="model-form" onSubmit={async (ev) => {
        ev.preventDefault();
        setBusy(true);
        setProblem(null);
        try {
          const typed = v.headers.trim() ? parseHeaders(v.headers) : undefined;
          const body = serverBody({
            ...s, name: v.name.trim(), url: v.url.trim() || s.url, enabled: v.enabled,
            allow_tools: splitNames(v.allow), deny_tools: splitNames(v.deny), high_risk_tools: splitNames(v.highRisk),
          }, { headers: v.clearHeaders ? {} : typed });
          const out = existing
            ? await api(`/admin/mcp-servers/${encodeURIComponent(existing.id)}`, { method: 'PUT', body })
            : await api('/admin/mcp-servers', { method: 'POST', body });
          toast(`MCP server ${out.name} saved.`, 'ok');
          onClose();
          onSaved();
        } catch (err) {
          setProblem(err);
        } finally {
          setBusy(false);
        }
      }}>
        <div className="form-grid">
          <Field label="Name" hint="its tools are named <name>.<tool>; a-z, 0-9, _ and -"><input name="name" value={v.name} onChange={set('name')} required pattern="[a-z0-9][a-z0-9_\-]{0,62}" autoComplete="off" /></Field>
          {s.transport === 'stdio'
            ? <Field label="Command" hint="a stdio server, run in the sandbox (change it through the API)"><code>{[s.command, ...(s.args || [])].join(' ')}</code></Field>
            : <Field label="URL" hint="the server's streamable HTTP endpoint"><input name="url" type="url" value={v.url} onChange={set('url')} required placeholder="https://…/mcp" /></Field>}
          <Field label="Headers" hint='one "Name: value" per line; write-only: never shown again'><textarea name="headers" rows={3} autoComplete="off" spellCheck={false} value={v.headers} onChange={set('headers')}
            placeholder={existing ? (existing.has_headers ? 'stored — leave empty to keep them' : 'none stored') : 'Authorization: Bearer …'} /></Field>
          <Field label="Allowed tools" hint="comma-separated; empty: every tool"><input name="allow_tools" value={v.allow} onChange={set('allow')} autoComplete="off" /></Field>
          <Field label="Denied tools" hint="never served"><input name="deny_tools" value={v.deny} onChange={set('deny')} autoComplete="off" /></Field>
          <Field label="High-risk tools" hint="a node must allow them explicitly"><input name="high_risk_tools" value={v.highRisk} onChange={set('highRisk')} autoComplete="off" /></Field>
        </div>
        {existing && existing.has_headers ? (
          <div className="field inline"><input name="clear_headers" type="checkbox" id="mcp-clear-headers" checked={v.clearHeaders} onChange={set('clearHeaders')} /><label htmlFor="mcp-clear-headers">Remove the stored headers</label></div>
        ) : null}
        <div className="field inline"><input name="enabled" type="checkbox" id="mcp-enabled" checked={v.enabled} onChange={set('enabled')} /><label htmlFor="mcp-enabled">Enabled</label></div>
        <ErrorBox error={problem} />
        <div className="actions"><button type="submit" className="primary" data-action="save-mcp" disabled={busy}>{existing ? 'Save server' : 'Add server'}</button><button type="button" onClick={onClose}>Cancel</button></div>
      </form>
    </Dialog>
  );
}

export default function McpPage() {
  useTitle('MCP servers');
  const [servers, setServers] = useState<any[] | null>(null);
  const [status, setStatus] = useState<Record<string, any>>({});
  const [problem, setProblem] = useState<unknown>(null);
  const [form, setForm] = useState<{ existing: any } | null>(null);
  const load = useCallback(async () => {
    const items: any[] = [];
    let cursor: string | null = null;
    do {
      const page: any = await api('/admin/mcp-servers', { query: { limit: 200, cursor } });
      items.push(...(page.items || []));
      cursor = page.next_cursor;
    } while (cursor);
    setServers(items);
  }, []);
  useEffect(() => { load().catch(setProblem); }, [load]);
  usePoll(async () => {
    const data = await api('/admin/status');
    setStatus(Object.fromEntries((data.mcp_servers || []).map((s: any) => [s.name, s])));
  }, STATUS_EVERY_MS, setProblem);
  return (
    <>
      <PageHead title="MCP servers"><button type="button" className="primary" data-action="add-mcp" onClick={() => setForm({ existing: null })}>Add server</button></PageHead>
      <ErrorBox error={problem} />
      <section className="panel"><h2>Registered servers</h2>
        <div data-testid="mcp-servers">
          {servers === null ? <Loading /> : !servers.length ? <Empty message="No MCP server registered. Add one: its tools become Agentix tools named <server>.<tool>." /> : (
            <Table caption="MCP servers" rows={servers} rowKey={(s) => s.id} rowProps={(s) => ({ 'data-server': s.name })} columns={[
              { label: 'Name', cell: (s) => <strong>{s.name}</strong> },
              { label: 'URL', className: 'wrap', cell: (s) => <code>{s.url || [s.command, ...(s.args || [])].join(' ')}</code> },
              { label: 'State', cell: (s) => { const v = serverState(s, status); return <span data-state={v.state}><Badge text={v.state} kind={v.kind} /></span>; } },
              { label: 'Tools', className: 'num', cell: (s) => { const v = serverState(s, status); return <span data-tools="">{v.s ? fmtNum(v.s.tools) : '—'}</span>; } },
              { label: 'Calls', className: 'num', cell: (s) => { const v = serverState(s, status); return v.s ? `${fmtNum(v.s.calls || 0)} (${fmtNum(v.s.errors || 0)} failed)` : '—'; } },
              { label: 'Mean latency', className: 'num', cell: (s) => { const v = serverState(s, status); return v.s && v.s.avg_latency_ms != null ? `${v.s.avg_latency_ms.toFixed(1)} ms` : '—'; } },
              { label: 'Last error', className: 'wrap', cell: (s) => { const v = serverState(s, status); return (v.s && v.s.last_error) || '—'; } },
              { label: 'Headers', cell: (s) => (s.has_headers ? <Badge text="stored" kind="ok" /> : <span className="muted">none</span>) },
              { label: 'Actions', cell: (s) => (
                <div className="actions">
                  <button type="button" className="small" aria-label={`Edit ${s.name}`} onClick={() => setForm({ existing: s })}>Edit</button>
                  <BusyButton className="small" aria-label={`${s.enabled ? 'Disable' : 'Enable'} ${s.name}`} action={async () => {
                    await api(`/admin/mcp-servers/${encodeURIComponent(s.id)}`, { method: 'PUT', body: serverBody(s, { enabled: !s.enabled }) });
                    toast(`${s.name} ${s.enabled ? 'disabled' : 'enabled'}.`, 'ok');
                    await load();
                  }}>{s.enabled ? 'Disable' : 'Enable'}</BusyButton>
                  <DeleteButton what={s.name} path={`/admin/mcp-servers/${encodeURIComponent(s.id)}`} done={`${s.name} deleted.`}
                    ask={`Delete the MCP server ${s.name}? Its tools disappear from every agent.`} after={load} />
                </div>
              ) },
            ]} />
          )}
        </div>
      </section>
      {form ? <ServerForm existing={form.existing} onClose={() => setForm(null)} onSaved={() => { load().catch(setProblem); }} /> : null}
    </>
  );
}
