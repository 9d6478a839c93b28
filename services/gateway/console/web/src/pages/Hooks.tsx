// Hooks: the caller's inbound webhooks (`/api/v1/hooks`) — a public URL whose signed calls each
// start a task of a saved workflow. A new hook's secret is shown once, in a dialog, with its URL;
// the list enables, disables and deletes them. Below, the delivery log of completion callbacks.

import { useCallback, useMemo, useState } from 'react';
import { api, enc, session } from '../lib/api';
import { fmtTime } from '../lib/format';
import { FieldError, SIGNATURES, hookBody, placeProblem } from '../lib/triggers';
import { Badge, BusyButton, DeleteButton, Dialog, Empty, ErrorBox, Field, Loading, PageHead, Select, Table, toast, usePoll, useTitle } from '../components/ui';
import { useWorkflows } from '../components/WorkflowSelect';
import { Deliveries } from '../components/Deliveries';

const FIELDS = ['name', 'workflow_id', 'signature', 'webhook', 'input_mapping'];
const EMPTY = { name: '', workflow_id: '', signature: 'standard', webhook: '', mapping: '' };

/** The hook's public URL on this server (the API answers the path). */
export const hookUrl = (path: string) => `${window.location.origin}${path}`;

function copy(text: string, what: string) {
  navigator.clipboard?.writeText(text).then(() => toast(`${what} copied.`, 'ok'), () => toast(`Could not copy the ${what.toLowerCase()}.`, 'error'));
}

function NewHook({ made, onClose }: { made: any; onClose: () => void }) {
  const url = hookUrl(made.url);
  return (
    <Dialog title={`Hook ${made.name} made`} onClose={onClose}>
      <p>Its URL: <code data-testid="hook-url">{url}</code> <button type="button" className="small" onClick={() => copy(url, 'URL')}>Copy URL</button></p>
      <p>Its signing secret — copy it now: it is <strong>not shown again</strong>.</p>
      <pre className="key-secret" data-testid="hook-secret">{made.secret}</pre>
      <p className="muted small">{made.signature === 'github'
        ? <>Paste it as the secret of GitHub's webhook form; GitHub signs each call with <code>X-Hub-Signature-256</code>.</>
        : <>Sign each call with any Standard Webhooks library and this secret (headers <code>webhook-id</code>, <code>webhook-timestamp</code>, <code>webhook-signature</code>).</>}</p>
      <div className="actions">
        <button type="button" onClick={() => copy(made.secret, 'Secret')}>Copy secret</button>
        <button type="button" className="primary" onClick={onClose}>Done</button>
      </div>
    </Dialog>
  );
}

export default function HooksPage() {
  useTitle('Hooks');
  const workflows = useWorkflows();
  const [hooks, setHooks] = useState<any[] | null>(null);
  const [problem, setProblem] = useState<unknown>(null);
  const [form, setForm] = useState(EMPTY);
  const [createErr, setCreateErr] = useState<unknown>(null);
  const [busy, setBusy] = useState(false);
  const [made, setMade] = useState<any>(null);
  const load = useCallback(async () => { setHooks((await api('/hooks')).items || []); setProblem(null); }, []);
  usePoll(load, 10000, setProblem);
  const placed = useMemo(() => placeProblem(createErr, FIELDS), [createErr]);
  const err = (name: string) => placed.fields[name] || null;
  const set = (patch: Partial<typeof EMPTY>) => setForm((f) => ({ ...f, ...patch }));
  return (
    <>
      <PageHead title="Hooks" />
      <p className="muted">A hook starts a task of a saved workflow whenever a signed call reaches its URL (a form, a CI, GitHub…). The task is yours and runs like any other.</p>
      <ErrorBox error={problem} />
      <section className="panel"><h2>Your hooks</h2>
        <div data-testid="hook-list">
          {hooks === null ? <Loading /> : !hooks.length ? <Empty message="No hook yet. Make one below from a saved workflow." /> : (
            <Table caption="Hooks" rows={hooks} rowKey={(h) => h.id} rowProps={(h) => ({ 'data-hook': h.name, 'data-enabled': String(h.enabled) })} columns={[
              { label: 'Name', cell: (h) => <strong>{h.name}</strong> },
              { label: 'URL', cell: (h) => <><code className="small">{hookUrl(h.url)}</code> <button type="button" className="small" aria-label={`Copy the URL of ${h.name}`} onClick={() => copy(hookUrl(h.url), 'URL')}>Copy</button></> },
              { label: 'Workflow', cell: (h) => workflows?.names[h.workflow_id] || <code>{h.workflow_id}</code> },
              !!session.user?.admin && { label: 'Owner', cell: (h) => h.owner }, // an admin sees everyone's
              { label: 'Signature', cell: (h) => h.signature },
              { label: 'Callback', cell: (h) => (h.webhook ? <code className="small">{h.webhook}</code> : '—') },
              { label: 'Calls', cell: (h) => <>{String(h.calls ?? 0)}{h.last_called_at ? <div className="muted small">last {fmtTime(h.last_called_at)}</div> : null}</> },
              { label: 'State', cell: (h) => <Badge text={h.enabled ? 'enabled' : 'disabled'} /> },
              { label: 'Actions', cell: (h) => (
                <div className="actions">
                  <BusyButton className="small" aria-label={`${h.enabled ? 'Disable' : 'Enable'} ${h.name}`} action={async () => {
                    await api(`/hooks/${enc(h.id)}`, { method: 'PATCH', body: { enabled: !h.enabled } });
                    toast(`${h.name} ${h.enabled ? 'disabled' : 'enabled'}.`, 'ok');
                    await load();
                  }}>{h.enabled ? 'Disable' : 'Enable'}</BusyButton>
                  <DeleteButton what={h.name} path={`/hooks/${enc(h.id)}`} done={`${h.name} deleted.`} after={load}
                    ask={`Delete the hook ${h.name}? Calls to its URL are refused from then on.`} />
                </div>
              ) },
            ]} />
          )}
        </div>
      </section>
      <form className="panel" aria-labelledby="hook-new" noValidate onSubmit={async (ev) => {
        ev.preventDefault();
        setBusy(true);
        setCreateErr(null);
        try {
          const out = await api('/hooks', { method: 'POST', body: hookBody(form) });
          setMade(out);
          setForm({ ...EMPTY, workflow_id: form.workflow_id });
          await load();
        } catch (e) { setCreateErr(e); } finally { setBusy(false); }
      }}>
        <h2 id="hook-new">New hook</h2>
        <div className="form-grid">
          <Field label="Name" error={err('name')}><input name="name" maxLength={200} autoComplete="off" value={form.name} onChange={(e) => set({ name: e.target.value })} /></Field>
          <Field label="Workflow" error={err('workflow_id')}><Select name="workflow_id" value={form.workflow_id} options={workflows?.options || [['', 'Loading saved workflows…']]} onChange={(e) => set({ workflow_id: e.target.value })} /></Field>
          <Field label="Signature" error={err('signature')}><Select name="signature" options={SIGNATURES} value={form.signature} onChange={(e) => set({ signature: e.target.value })} /></Field>
          <Field label="Completion callback" hint="optional: a URL told when each task ends" error={err('webhook')}><input name="webhook" type="url" autoComplete="off" placeholder="https://…" value={form.webhook} onChange={(e) => set({ webhook: e.target.value })} /></Field>
        </div>
        <Field label="Input mapping (JSON)" hint={<>optional: {'{"field": "$.body.a.b"}'}, paths into <code>$.body</code>, <code>$.headers</code>, <code>$.query</code>; empty: the JSON body is the input</>} error={err('input_mapping')}>
          <textarea name="input_mapping" rows={2} spellCheck={false} value={form.mapping} onChange={(e) => set({ mapping: e.target.value })} />
        </Field>
        <ErrorBox error={createErr instanceof FieldError ? null : createErr} items={placed.rest} />
        <div className="actions"><button type="submit" className="primary" data-action="make-hook" disabled={busy}>Make hook</button></div>
      </form>
      {made ? <NewHook made={made} onClose={() => setMade(null)} /> : null}
      <Deliveries />
    </>
  );
}
