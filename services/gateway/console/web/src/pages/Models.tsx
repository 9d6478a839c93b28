// Models (admins): configs with a write-only API key, the failover chain, breaker states, and
// proof that every dispatcher applied the last change (the chain revision each one reports in
// its heartbeat, compared with the revision the PUT returned).

import { useCallback, useEffect, useState } from 'react';
import { api } from '../lib/api';
import { fmtTime } from '../lib/format';
import { Badge, BusyButton, Dialog, Empty, ErrorBox, Field, Loading, PageHead, Select, Table, toast, usePoll, useTitle } from '../components/ui';
import { BreakerTable } from './Status';

/** The chain revision a dispatcher reports in its heartbeat detail (a few spellings accepted). */
export function chainRevisionOf(detail: any): number | null {
  if (!detail || typeof detail !== 'object') return null;
  const candidates = [
    detail.chain_revision,
    detail.chain && detail.chain.revision,
    detail.models && detail.models.chain_revision,
    detail.models && detail.models.revision,
    detail.control && (detail.control.chain_revision ?? (detail.control['models.chain'] && detail.control['models.chain'].revision)),
  ];
  const found = candidates.find((v) => typeof v === 'number');
  return found === undefined ? null : found;
}

function modelBody(m: any, changes: Record<string, unknown> = {}) {
  const body: Record<string, unknown> = {
    name: m.name, provider: m.provider, base_url: m.base_url || null, model: m.model,
    params: m.params || {}, enabled: m.enabled, ...changes,
  };
  if (!body.api_key) delete body.api_key; // write-only: leaving it out keeps the stored key
  return body;
}

// The model built into every dispatcher: it can be chained without a stored model of that name.
export const OFFLINE_MODEL = 'offline';
const BUILT_IN_HELP = 'the AGENTIX_LLM_* endpoint the dispatchers were started with, else the offline model';

/** What the chain editor offers to add: stored models not in the draft, and the built-in offline model. */
export function chainChoices(models: { name: string }[], draft: string[]): [string, string][] {
  const names = new Set(models.map((m) => m.name));
  const choices: [string, string][] = models.filter((m) => !draft.includes(m.name)).map((m) => [m.name, m.name]);
  if (!names.has(OFFLINE_MODEL) && !draft.includes(OFFLINE_MODEL)) choices.push([OFFLINE_MODEL, `${OFFLINE_MODEL} (built-in)`]);
  return choices;
}

function numberOrNull(v: string) {
  return v === '' ? null : Number(v);
}

function ModelForm({ existing, onSaved, onClose }: { existing: any; onSaved: (m: any) => void; onClose: () => void }) {
  const m = existing || { provider: 'openai', params: {}, enabled: true };
  const p = m.params || {};
  const [v, setV] = useState({
    name: m.name || '', provider: m.provider, base_url: m.base_url || '', model: m.model || '', api_key: '',
    temperature: String(p.temperature ?? ''), max_tokens: String(p.max_tokens ?? ''), timeout_s: String(p.timeout_s ?? ''), enabled: m.enabled !== false,
  });
  const [problem, setProblem] = useState<unknown>(null);
  const [busy, setBusy] = useState(false);
  const set = (k: string) => (ev: React.ChangeEvent<HTMLInputElement | HTMLSelectElement>) => setV({ ...v, [k]: ev.target.type === 'checkbox' ? (ev.target as HTMLInputElement).checked : ev.target.value });
  const submit = async (ev: React.FormEvent) => {
    ev.preventDefault();
    setBusy(true);
    setProblem(null);
    const params = { ...(m.params || {}) };
    for (const k of ['temperature', 'max_tokens', 'timeout_s'] as const) {
      const n = numberOrNull(v[k]);
      if (n === null) delete params[k]; else params[k] = n;
    }
    const body = modelBody({ name: v.name.trim(), provider: v.provider, base_url: v.base_url.trim() || null, model: v.model.trim(), params, enabled: v.enabled },
      v.api_key ? { api_key: v.api_key } : {});
    try {
      const out = existing
        ? await api(`/admin/models/${encodeURIComponent(existing.id)}`, { method: 'PUT', body })
        : await api('/admin/models', { method: 'POST', body });
      toast(`Model ${out.name} saved.`, 'ok');
      onClose();
      onSaved(out);
    } catch (err) {
      setProblem(err);
    } finally {
      setBusy(false);
    }
  };
  return (
    <Dialog title={existing ? `Edit model ${existing.name}` : 'Add a model'} onClose={onClose}>
      <form className="model-form" onSubmit={submit}>
        <div className="form-grid">
          <Field label="Name (alias)" hint="used by the chain and by agent nodes"><input name="name" value={v.name} onChange={set('name')} required pattern="[A-Za-z0-9_.:\-]{1,100}" autoComplete="off" /></Field>
          <Field label="Provider"><Select name="provider" value={v.provider} onChange={set('provider')} options={[['openai', 'OpenAI-compatible'], ['offline', 'Offline (built-in)']]} /></Field>
          <Field label="Base URL"><input name="base_url" type="url" value={v.base_url} onChange={set('base_url')} placeholder="https://…/v1" /></Field>
          <Field label="Model"><input name="model" value={v.model} onChange={set('model')} required autoComplete="off" /></Field>
          <Field label="API key" hint="write-only: never shown again"><input name="api_key" type="password" autoComplete="new-password" value={v.api_key} onChange={set('api_key')}
            placeholder={existing ? (existing.has_api_key ? 'stored — leave empty to keep it' : 'none stored') : 'optional'} /></Field>
          <Field label="Temperature"><input name="temperature" type="number" step="0.1" min="0" max="2" value={v.temperature} onChange={set('temperature')} /></Field>
          <Field label="Max tokens"><input name="max_tokens" type="number" min="1" value={v.max_tokens} onChange={set('max_tokens')} /></Field>
          <Field label="Timeout (s)"><input name="timeout_s" type="number" min="1" step="1" value={v.timeout_s} onChange={set('timeout_s')} /></Field>
        </div>
        <div className="field inline"><input name="enabled" type="checkbox" id="model-enabled" checked={v.enabled} onChange={set('enabled')} /><label htmlFor="model-enabled">Enabled</label></div>
        <ErrorBox error={problem} />
        <div className="actions"><button type="submit" className="primary" disabled={busy}>{existing ? 'Save model' : 'Add model'}</button><button type="button" onClick={onClose}>Cancel</button></div>
      </form>
    </Dialog>
  );
}

interface Chain { revision: number; active: string | null; fallbacks: string[] }

export default function ModelsPage() {
  useTitle('Models');
  const [models, setModels] = useState<any[] | null>(null);
  const [chain, setChain] = useState<Chain>({ revision: 0, active: null, fallbacks: [] });
  const [draft, setDraft] = useState<string[] | null>(null);
  const [target, setTarget] = useState<{ revision: number; at: string | null } | null>(null);
  const [dispatchers, setDispatchers] = useState<{ instance: string; revision: number | null }[]>([]);
  const [breakers, setBreakers] = useState<any>({});
  const [problem, setProblem] = useState<unknown>(null);
  const [form, setForm] = useState<{ existing: any } | null>(null);
  const [confirmClear, setConfirmClear] = useState(false);
  const [clearProblem, setClearProblem] = useState<unknown>(null);

  const namesOf = (c: Chain) => (c.active ? [c.active, ...c.fallbacks] : [...c.fallbacks]);
  const chainNames = namesOf(chain);
  const current = draft ?? chainNames;
  const dirty = draft !== null && JSON.stringify(draft) !== JSON.stringify(chainNames);

  const load = useCallback(async () => {
    const [list, c] = await Promise.all([api('/admin/models', { query: { limit: 200 } }), api('/admin/models/chain')]);
    const next = { revision: c.revision || 0, active: c.active || null, fallbacks: c.fallbacks || [] };
    setModels(list.items);
    setChain(next);
    setDraft((d) => (d !== null && JSON.stringify(d) !== JSON.stringify(namesOf(next)) ? d : null));
    setTarget((t) => t || (next.revision ? { revision: next.revision, at: null } : null));
    return next;
  }, []);
  useEffect(() => { load().catch(setProblem); }, [load]);

  const afterModelChange = async () => {
    const next = await load();
    // Saving a model re-publishes the chain (its revision grows): watch that one apply too.
    setTarget({ revision: next.revision, at: new Date().toISOString() });
  };

  usePoll(async () => {
    const st = await api('/admin/status');
    setDispatchers((st.instances || []).filter((i: any) => i.service === 'dispatcher').map((i: any) => ({ instance: i.instance, revision: chainRevisionOf(i.detail) })));
    const br: Record<string, any> = {};
    for (const b of Array.isArray(st.breakers) ? st.breakers : Object.values(st.breakers || {}) as any[]) br[b.model] = b;
    setBreakers(br);
  }, 1500, setProblem);

  const putChain = async (active: string | null, fallbacks: string[]) => {
    const out = await api('/admin/models/chain', { method: 'PUT', body: { active, fallbacks } });
    setChain({ revision: out.revision, active: out.active || null, fallbacks: out.fallbacks || [] });
    setDraft(null);
    setTarget({ revision: out.revision, at: new Date().toISOString() });
    return out;
  };

  const moveToFront = (name: string) => {
    setDraft([name, ...current.filter((n) => n !== name)]);
    toast(`${name} is first in the draft chain — press “Save chain” to apply it.`);
  };
  const toggle = async (m: any) => {
    await api(`/admin/models/${encodeURIComponent(m.id)}`, { method: 'PUT', body: modelBody(m, { enabled: !m.enabled }) });
    toast(`${m.name} ${m.enabled ? 'disabled' : 'enabled'}.`, 'ok');
    await afterModelChange();
  };
  const remove = async (m: any) => {
    if (!window.confirm(`Delete model ${m.name}?`)) return;
    await api(`/admin/models/${encodeURIComponent(m.id)}`, { method: 'DELETE' });
    toast(`${m.name} deleted.`, 'ok');
    await afterModelChange();
  };
  const position = (name: string) => {
    const i = chainNames.indexOf(name);
    if (i < 0) return '—';
    return i === 0 ? <Badge text="active" /> : `fallback ${i}`;
  };

  const known = new Set([OFFLINE_MODEL, ...(models || []).map((m) => m.name)]);
  const addable = chainChoices(models || [], current);
  const move = (i: number, j: number) => { const d = [...current]; [d[i], d[j]] = [d[j], d[i]]; setDraft(d); };

  const t = target;
  const applied = t ? dispatchers.filter((d) => d.revision !== null && d.revision >= t.revision) : [];
  const all = dispatchers.length > 0 && applied.length === dispatchers.length;

  return (
    <>
      <PageHead title="Models"><button type="button" className="primary" onClick={() => setForm({ existing: null })}>Add model</button></PageHead>
      <ErrorBox error={problem} />
      <section className="panel" aria-labelledby="md-list"><h2 id="md-list">Configured models</h2>
        <div data-testid="models">
          {models === null ? <Loading /> : models.length ? (
            <Table caption="Models" rows={models} rowKey={(m) => m.id} rowProps={(m) => ({ 'data-model': m.name })} columns={[
              { label: 'Name', cell: (m) => <strong>{m.name}</strong> },
              { label: 'Provider', cell: (m) => m.provider },
              { label: 'Model', cell: (m) => <code>{m.model}</code> },
              { label: 'Base URL', className: 'wrap', cell: (m) => m.base_url || '—' },
              { label: 'API key', cell: (m) => (m.has_api_key ? <Badge text="stored" kind="ok" /> : <Badge text="none" kind="disabled" />) },
              { label: 'Enabled', cell: (m) => (m.enabled ? <Badge text="enabled" /> : <Badge text="disabled" />) },
              { label: 'Chain', cell: (m) => position(m.name) },
              { label: 'Breaker', cell: (m) => { const b = breakers[m.name]; return b ? <Badge text={b.state.replace('_', '-')} kind={b.state} /> : '—'; } },
              { label: 'Actions', cell: (m) => (
                <div className="actions">
                  <button type="button" className="small" onClick={() => setForm({ existing: m })}>Edit</button>
                  <BusyButton className="small" action={() => toggle(m)}>{m.enabled ? 'Disable' : 'Enable'}</BusyButton>
                  <button type="button" className="small" data-action="front" aria-label={`Move ${m.name} to the front of the chain`} onClick={() => moveToFront(m.name)}>Move to front</button>
                  <BusyButton className="small danger" action={() => remove(m)}>Delete</BusyButton>
                </div>
              ) },
            ]} />
          ) : (
            <Empty message={`No model configured yet. Tasks use the dispatchers' built-in model (${BUILT_IN_HELP}) until you chain one.`}>
              <button type="button" className="primary" onClick={() => setForm({ existing: null })}>Add a model</button>
            </Empty>
          )}
        </div>
      </section>
      <div className="grid-2">
        <section className="panel" aria-labelledby="md-chain"><h2 id="md-chain">Failover chain</h2>
          <p className="muted small">The first model answers; the others take over in order when its breaker opens.</p>
          <div data-testid="chain">
            {current.length ? (
              <ol className="chain" aria-label="Failover chain, first is active">
                {current.map((name, i) => (
                  <li key={name} data-name={name}>
                    <span className="pos">{i + 1}.</span>
                    <span className="name">{name} {i === 0 ? <Badge text="active" /> : <span className="muted small">fallback</span>}
                      {name === OFFLINE_MODEL && !(models || []).some((m) => m.name === name) ? <> <Badge text="built-in" kind="disabled" /></> : null}
                      {known.has(name) ? null : <Badge text="unknown model" kind="error" />}</span>
                    <button type="button" className="small" disabled={i === 0} aria-label={`Move ${name} up`} onClick={() => move(i, i - 1)}>↑</button>
                    <button type="button" className="small" disabled={i === current.length - 1} aria-label={`Move ${name} down`} onClick={() => move(i, i + 1)}>↓</button>
                    <button type="button" className="small danger" aria-label={`Remove ${name} from the chain`} onClick={() => setDraft(current.filter((n) => n !== name))}>Remove</button>
                  </li>
                ))}
              </ol>
            ) : (
              <Empty message={chain.active
                ? 'The draft is empty: add a model, or use “Clear chain” to go back to the built-in model.'
                : `No chain set: tasks use the dispatchers' built-in model (${BUILT_IN_HELP}).`} />
            )}
            <div className="actions">
              {addable.length ? (
                <Select aria-label="Add a model to the chain" value="" onChange={(ev) => { if (ev.target.value) setDraft([...current, ev.target.value]); }}
                  options={[['', current.length ? 'Add a fallback…' : 'Choose the active model…'], ...addable]} />
              ) : null}
              <BusyButton className="primary" disabled={!dirty || !current.length} data-action="save-chain" action={async () => {
                const [active, ...fallbacks] = current;
                const out = await putChain(active, fallbacks);
                toast(`Chain saved (revision ${out.revision}).`, 'ok');
              }}>Save chain</BusyButton>
              <button type="button" disabled={!dirty} onClick={() => setDraft(null)}>Revert</button>
              <button type="button" className="danger" data-action="clear-chain" disabled={!chain.active}
                title={chain.active ? `Go back to the built-in model: ${BUILT_IN_HELP}` : 'No chain is set'}
                onClick={() => { setClearProblem(null); setConfirmClear(true); }}>Clear chain — use the built-in model</button>
              {dirty ? <Badge text="unsaved changes" kind="warn" /> : <span className="muted small">revision {chain.revision}</span>}
            </div>
          </div>
        </section>
        <section className="panel" aria-labelledby="md-apply"><h2 id="md-apply">Applied by dispatchers</h2>
          <div data-testid="apply" aria-live="polite">
            {!t ? <p className="muted">No chain change yet.</p> : (
              <>
                <div className={`notice ${all ? 'ok' : 'warn'}`} data-applied={all ? 'true' : 'false'} data-revision={t.revision}>
                  <strong>{all
                    ? `Revision ${t.revision} applied by every dispatcher (${applied.length}/${dispatchers.length}).`
                    : dispatchers.length ? `Revision ${t.revision}: applied by ${applied.length} of ${dispatchers.length} dispatchers…` : `Revision ${t.revision}: no live dispatcher to apply it.`}</strong>
                  {t.at ? <span className="muted small"> saved {fmtTime(t.at)}</span> : null}
                </div>
                {dispatchers.length ? (
                  <ul className="apply-list">{dispatchers.map((d) => (
                    <li key={d.instance} data-instance={d.instance}>{d.revision !== null && d.revision >= t.revision ? '✓ ' : '… '}<code>{d.instance}</code>{` reports revision ${d.revision ?? 'unknown'}`}</li>
                  ))}</ul>
                ) : null}
                {dispatchers.some((d) => d.revision === null) ? <p className="muted small">A dispatcher that reports no revision in its heartbeat cannot be confirmed.</p> : null}
              </>
            )}
          </div>
        </section>
      </div>
      <section className="panel" aria-labelledby="md-br"><h2 id="md-br">Breakers and recent failures</h2><div data-testid="breakers"><BreakerTable breakers={breakers} /></div></section>
      {form ? <ModelForm existing={form.existing} onClose={() => setForm(null)} onSaved={() => { afterModelChange().catch(setProblem); }} /> : null}
      {confirmClear ? (
        <Dialog title="Clear the failover chain?" onClose={() => setConfirmClear(false)}>
          <div className="body">
            <p>Every dispatcher stops using <strong>{chainNames.join(' → ')}</strong> for new tasks and goes back to its built-in model: {BUILT_IN_HELP}.</p>
            <p className="muted small">Running tasks keep the chain they started with. The models stay configured; you can chain them again later.</p>
            <ErrorBox error={clearProblem} />
            <div className="actions">
              <BusyButton className="danger solid" data-action="confirm-clear" action={async () => {
                try {
                  const out = await putChain(null, []);
                  setConfirmClear(false);
                  toast(`Chain cleared (revision ${out.revision}): the built-in model answers.`, 'ok');
                } catch (err) { setClearProblem(err); }
              }}>Clear chain</BusyButton>
              <button type="button" onClick={() => setConfirmClear(false)}>Cancel</button>
            </div>
          </div>
        </Dialog>
      ) : null}
    </>
  );
}
