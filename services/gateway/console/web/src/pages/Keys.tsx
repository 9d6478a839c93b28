// API keys: the caller's long-lived keys for programs and chat UIs (`/api/v1/keys`). A new key
// is shown once, in a dialog, with how to use it; the list shows each key's prefix, scopes,
// created / last used / expiry and state, and revokes one (refused at once on every gateway).

import { useCallback, useEffect, useState } from 'react';
import { api, session } from '../lib/api';
import { fmtTime } from '../lib/format';
import { Badge, DeleteButton, Dialog, Empty, ErrorBox, Field, Loading, PageHead, Select, Table, toast, useTitle } from '../components/ui';

export const SCOPES: [string, string][] = [
  ['chat', 'chat — /v1 (OpenAI clients) and /lg (LangGraph clients)'],
  ['mcp', 'mcp — /mcp (MCP clients)'],
  ['api', 'api — the Agentix API (/api/v1)'],
  ['admin', 'admin — the admin routes'],
];
export const EXPIRIES: [string, string][] = [['30d', '30 days'], ['90d', '90 days'], ['365d', '1 year'], ['', 'never']];

/** A key's state at `now` (ms): revoked, expired or active. */
export function keyState(key: { revoked_at?: string | null; expires_at?: string | null }, now = Date.now()): string {
  if (key.revoked_at) return 'revoked';
  if (key.expires_at && Date.parse(key.expires_at) <= now) return 'expired';
  return 'active';
}

/** The POST body: the scopes ticked (none ticked is refused by the server, naming the field). */
export function keyBody(name: string, expires: string, scopes: Record<string, boolean>) {
  const body: Record<string, unknown> = { name: name.trim(), scopes: SCOPES.map(([s]) => s).filter((s) => scopes[s]) };
  if (expires) body.expires_in = expires;
  return body;
}

function NewKey({ made, onClose }: { made: any; onClose: () => void }) {
  return (
    <Dialog title={`Key ${made.name} made`} onClose={onClose}>
      <p>Copy it now: it is <strong>not shown again</strong>.</p>
      <pre className="key-secret" data-testid="new-key">{made.key}</pre>
      <p className="muted small">Use it as the bearer token (<code>Authorization: Bearer …</code>), as an OpenAI client's
        <code> api_key</code> with the base URL <code>{window.location.origin}/v1</code>, or as a LangGraph client's <code>api_key</code>.</p>
      <div className="actions">
        <button type="button" onClick={() => { navigator.clipboard?.writeText(made.key).then(() => toast('Copied.', 'ok'), () => {}); }}>Copy</button>
        <button type="button" className="primary" onClick={onClose}>Done</button>
      </div>
    </Dialog>
  );
}

export default function KeysPage() {
  useTitle('API keys');
  const admin = !!session.user?.admin;
  const [keys, setKeys] = useState<any[] | null>(null);
  const [problem, setProblem] = useState<unknown>(null);
  const [name, setName] = useState('');
  const [expires, setExpires] = useState('90d');
  const [scopes, setScopes] = useState<Record<string, boolean>>({ chat: true, mcp: true, api: true, admin: false });
  const [createErr, setCreateErr] = useState<unknown>(null);
  const [busy, setBusy] = useState(false);
  const [made, setMade] = useState<any>(null);
  const load = useCallback(async () => setKeys((await api('/keys')).items || []), []);
  useEffect(() => { load().catch(setProblem); }, [load]);
  return (
    <>
      <PageHead title="API keys" />
      <ErrorBox error={problem} />
      <section className="panel"><h2>Your keys</h2>
        <div data-testid="key-list">
          {keys === null ? <Loading /> : !keys.length ? <Empty message="No API key yet. Make one for a program or a chat UI that you set up once." /> : (
            <Table caption="API keys" rows={keys} rowKey={(k) => k.id} rowProps={(k) => ({ 'data-key': k.name, 'data-state': keyState(k) })} columns={[
              { label: 'Name', cell: (k) => <strong>{k.name}</strong> },
              { label: 'Key', cell: (k) => <code>{k.prefix}…</code> },
              { label: 'Scopes', cell: (k) => (k.scopes || []).join(', ') },
              { label: 'Created', className: 'time', cell: (k) => fmtTime(k.created_at) },
              { label: 'Last used', className: 'time', cell: (k) => (k.last_used_at ? fmtTime(k.last_used_at) : 'never') },
              { label: 'Expires', className: 'time', cell: (k) => (k.expires_at ? fmtTime(k.expires_at) : 'never') },
              { label: 'State', cell: (k) => { const s = keyState(k); return <Badge text={s} kind={s === 'active' ? 'ok' : 'failed'} />; } },
              { label: 'Actions', cell: (k) => (keyState(k) === 'revoked' ? null : (
                <DeleteButton label="Revoke" what={k.name} path={`/keys/${encodeURIComponent(k.id)}`} done={`${k.name} revoked.`}
                  ask={`Revoke the key ${k.name}? Every client using it is refused at once.`} after={load} />
              )) },
            ]} />
          )}
        </div>
      </section>
      <form className="panel" aria-labelledby="key-new" onSubmit={async (ev) => {
        ev.preventDefault();
        setBusy(true);
        setCreateErr(null);
        try {
          const out = await api('/keys', { method: 'POST', body: keyBody(name, expires, scopes) });
          setMade(out);
          setName('');
          await load();
        } catch (err) { setCreateErr(err); } finally { setBusy(false); }
      }}>
        <h2 id="key-new">New key</h2>
        <div className="form-grid">
          <Field label="Name" hint="what uses it, e.g. open-webui"><input name="name" required maxLength={100} autoComplete="off" value={name} onChange={(e) => setName(e.target.value)} /></Field>
          <Field label="Expires"><Select name="expires" options={EXPIRIES} value={expires} onChange={(e) => setExpires(e.target.value)} /></Field>
        </div>
        <fieldset className="scopes"><legend>Scopes</legend>
          {SCOPES.filter(([s]) => s !== 'admin' || admin).map(([s, label]) => (
            <div className="field inline" key={s}>
              <input type="checkbox" id={`scope-${s}`} name={`scope-${s}`} checked={!!scopes[s]} onChange={(e) => setScopes({ ...scopes, [s]: e.target.checked })} />
              <label htmlFor={`scope-${s}`}>{label}</label>
            </div>
          ))}
        </fieldset>
        <ErrorBox error={createErr} />
        <div className="actions"><button type="submit" className="primary" data-action="make-key" disabled={busy}>Make key</button></div>
      </form>
      {made ? <NewKey made={made} onClose={() => setMade(null)} /> : null}
    </>
  );
}
