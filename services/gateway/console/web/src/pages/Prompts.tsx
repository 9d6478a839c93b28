// Prompts (admins): versions, a line diff between any two, hot activation and a canary share.

import { useCallback, useEffect, useState } from 'react';
import { useSearchParams } from 'react-router-dom';
import { api } from '../lib/api';
import { fmtTime } from '../lib/format';
import { Badge, BusyButton, Empty, ErrorBox, Field, PageHead, Select, Table, toast, useTitle } from '../components/ui';
import { DiffView } from '../components/DiffView';

function NewPrompt({ onCreated }: { onCreated: (name: string) => void }) {
  const [name, setName] = useState('');
  const [text, setText] = useState('');
  const [note, setNote] = useState('');
  const [err, setErr] = useState<unknown>(null);
  const [busy, setBusy] = useState(false);
  return (
    <form className="panel" onSubmit={async (ev) => {
      ev.preventDefault();
      setBusy(true);
      setErr(null);
      try {
        await api(`/admin/prompts/${encodeURIComponent(name.trim())}/versions`, { method: 'POST', body: { text, note: note || null } });
        toast(`Prompt ${name.trim()} created.`, 'ok');
        onCreated(name.trim());
      } catch (e) { setErr(e); } finally { setBusy(false); }
    }}>
      <h2>New prompt</h2>
      <Field label="Name" hint="letters, digits, . _ -"><input required pattern="[A-Za-z0-9_.\-]{1,100}" autoComplete="off" autoFocus value={name} onChange={(e) => setName(e.target.value)} /></Field>
      <Field label="Text (version 1)"><textarea rows={10} required value={text} onChange={(e) => setText(e.target.value)} /></Field>
      <Field label="Note"><input maxLength={500} value={note} onChange={(e) => setNote(e.target.value)} /></Field>
      <ErrorBox error={err} />
      <div className="actions"><button type="submit" className="primary" disabled={busy}>Create prompt</button></div>
    </form>
  );
}

function PromptDetail({ p, reload, initialB }: { p: any; reload: (b?: number) => Promise<void>; initialB: number | null }) {
  const byVersion = (v: number | null) => p.versions.find((x: any) => x.version === v);
  const [a, setA] = useState<number>(p.active_version || p.versions[0].version);
  const [b, setB] = useState<number>(initialB && byVersion(initialB) ? initialB : p.versions[p.versions.length - 1].version);
  useEffect(() => { if (initialB && byVersion(initialB)) setB(initialB); }, [initialB, p]); // eslint-disable-line react-hooks/exhaustive-deps
  const candidates = p.versions.filter((v: any) => v.version !== p.active_version);
  const [canaryVer, setCanaryVer] = useState(String(p.canary_version ?? (candidates.length ? candidates[candidates.length - 1].version : '')));
  const [canaryPct, setCanaryPct] = useState(String(p.canary_percent || 10));
  const latest = p.versions[p.versions.length - 1];
  const [text, setText] = useState(latest ? latest.text : '');
  const [note, setNote] = useState('');
  const [activateNow, setActivateNow] = useState(false);
  const [addErr, setAddErr] = useState<unknown>(null);
  useEffect(() => {
    setCanaryVer(String(p.canary_version ?? (candidates.length ? candidates[candidates.length - 1].version : '')));
  }, [p]); // eslint-disable-line react-hooks/exhaustive-deps

  const activate = async (version: number, canary?: { canary_version: number; canary_percent: number }) => {
    const body: Record<string, unknown> = { version };
    const keep = canary || (p.canary_version && p.canary_version !== version ? { canary_version: p.canary_version, canary_percent: p.canary_percent } : null);
    if (keep && keep.canary_percent) Object.assign(body, keep);
    await api(`/admin/prompts/${encodeURIComponent(p.name)}/activate`, { method: 'POST', body });
  };
  const options = p.versions.map((v: any) => [String(v.version), `v${v.version}`] as [string, string]);
  return (
    <div>
      <section className="panel" aria-labelledby="pr-title">
        <h2 id="pr-title">{p.name} {p.active_version ? <Badge text={`active v${p.active_version}`} kind="active" /> : <Badge text="no active version" kind="warn" />}</h2>
        <p className="muted small">revision {p.revision} · updated {fmtTime(p.updated_at)}</p>
        <Table caption={`Versions of ${p.name}`} rows={[...p.versions].reverse()} rowKey={(v: any) => String(v.version)} columns={[
          { label: 'Version', cell: (v: any) => <strong>{`v${v.version}`}</strong> },
          { label: 'State', cell: (v: any) => <>{v.version === p.active_version ? <Badge text="active" /> : null}{v.version === p.canary_version && p.canary_percent ? <Badge text={`canary ${p.canary_percent}%`} kind="canary" /> : null}</> },
          { label: 'Note', className: 'wrap', cell: (v: any) => v.note || '—' },
          { label: 'By', cell: (v: any) => v.created_by || '—' },
          { label: 'Created', cell: (v: any) => fmtTime(v.created_at) },
          { label: 'Actions', cell: (v: any) => (
            <div className="actions">
              <BusyButton className="small" disabled={v.version === p.active_version} action={async () => { await activate(v.version); toast(`v${v.version} is active.`, 'ok'); await reload(); }}>Activate</BusyButton>
              <button type="button" className="small" onClick={() => { setA(p.active_version || v.version); setB(v.version); }}>Diff vs active</button>
            </div>
          ) },
        ]} />
      </section>
      <section className="panel" aria-labelledby="pr-diff">
        <h2 id="pr-diff">Diff</h2>
        <div className="toolbar">
          <label>From <Select aria-label="Compare from version" value={String(a)} onChange={(e) => setA(Number(e.target.value))} options={options} /></label>
          <label>to <Select aria-label="Compare to version" value={String(b)} onChange={(e) => setB(Number(e.target.value))} options={options} /></label>
        </div>
        <DiffView a={byVersion(a)?.text} b={byVersion(b)?.text} labelA={`v${a}`} labelB={`v${b}`} />
      </section>
      <div className="grid-2">
        <section className="panel" aria-labelledby="pr-canary">
          <h2 id="pr-canary">Canary</h2>
          <p className="muted small">Send a share of new tasks to a candidate version.</p>
          {candidates.length ? (
            <div>
              <div className="toolbar">
                <label>Version <Select aria-label="Canary version" value={canaryVer} onChange={(e) => setCanaryVer(e.target.value)} options={candidates.map((v: any) => [String(v.version), `v${v.version}`] as [string, string])} /></label>
                <label>Share <input type="number" min={0} max={100} step={1} aria-label="Canary percent" style={{ width: '6rem' }} value={canaryPct} onChange={(e) => setCanaryPct(e.target.value)} /> %</label>
              </div>
              <input type="range" min={0} max={100} step={1} aria-label="Canary percent slider" value={canaryPct} onChange={(e) => setCanaryPct(e.target.value)} />
              <div className="actions">
                <BusyButton className="primary" disabled={!candidates.length || !p.active_version} action={async () => {
                  const pct = Math.max(0, Math.min(100, Math.round(Number(canaryPct))));
                  await activate(p.active_version, { canary_version: Number(canaryVer), canary_percent: pct });
                  toast(`Canary v${canaryVer} at ${pct} %.`, 'ok');
                  await reload();
                }}>{p.canary_percent ? 'Update canary' : 'Start canary'}</BusyButton>
                <BusyButton disabled={!p.canary_percent} action={async () => {
                  await api(`/admin/prompts/${encodeURIComponent(p.name)}/activate`, { method: 'POST', body: { version: p.active_version } });
                  toast('Canary stopped.', 'ok');
                  await reload();
                }}>Stop canary</BusyButton>
              </div>
            </div>
          ) : <Empty message="Add a second version to run a canary." />}
        </section>
        <section className="panel" aria-labelledby="pr-new">
          <h2 id="pr-new">New version</h2>
          <form onSubmit={async (ev) => {
            ev.preventDefault();
            setAddErr(null);
            try {
              const v = await api(`/admin/prompts/${encodeURIComponent(p.name)}/versions`, { method: 'POST', body: { text, note: note || null } });
              if (activateNow) await activate(v.version);
              toast(`Version ${v.version} saved${activateNow ? ' and active' : ''}.`, 'ok');
              await reload(v.version);
            } catch (e) { setAddErr(e); }
          }}>
            <Field label="Text"><textarea rows={8} value={text} onChange={(e) => setText(e.target.value)} /></Field>
            <Field label="Note"><input maxLength={500} placeholder="what changed" value={note} onChange={(e) => setNote(e.target.value)} /></Field>
            <div className="field inline"><input type="checkbox" id="pv-activate" checked={activateNow} onChange={(e) => setActivateNow(e.target.checked)} /><label htmlFor="pv-activate">Activate it now</label></div>
            <ErrorBox error={addErr} />
            <div className="actions"><button type="submit" className="primary">Save new version</button></div>
          </form>
        </section>
      </div>
    </div>
  );
}

export default function PromptsPage() {
  useTitle('Prompts');
  const [query, setQuery] = useSearchParams();
  const [prompts, setPrompts] = useState<any[]>([]);
  const [selected, setSelected] = useState<string | null>(query.get('name'));
  const [creating, setCreating] = useState(false);
  const [problem, setProblem] = useState<unknown>(null);
  const [newest, setNewest] = useState<number | null>(null);
  const load = useCallback(async (b?: number) => {
    const body = await api('/admin/prompts', { query: { limit: 200 } });
    setPrompts(body.items);
    setSelected((s) => (body.items.some((p: any) => p.name === s) ? s : body.items[0]?.name ?? null));
    if (b !== undefined) setNewest(b);
  }, []);
  useEffect(() => { load().catch(setProblem); }, [load]);
  const choose = (name: string) => {
    setCreating(false);
    setSelected(name);
    setNewest(null);
    setQuery({ name }, { replace: true });
    load().catch(setProblem);
  };
  const current = prompts.find((p) => p.name === selected);
  return (
    <>
      <PageHead title="Prompts"><button type="button" className="primary" onClick={() => setCreating(true)}>New prompt</button></PageHead>
      <ErrorBox error={problem} />
      <div className="side-layout">
        <section className="panel"><h2>All prompts</h2>
          <nav aria-label="Prompts">
            {prompts.length ? (
              <ul className="chain">{prompts.map((p) => (
                <li key={p.name}>
                  <a href={`/console/prompts?name=${encodeURIComponent(p.name)}`} aria-current={p.name === selected ? 'true' : undefined}
                    onClick={(ev) => { ev.preventDefault(); choose(p.name); }}>{p.name}</a>
                  {p.active_version ? <Badge text={`v${p.active_version}`} kind="active" /> : <Badge text="inactive" kind="disabled" />}
                  {p.canary_percent ? <Badge text={`canary v${p.canary_version} ${p.canary_percent}%`} kind="canary" /> : null}
                </li>
              ))}</ul>
            ) : <Empty message="No prompt yet." />}
          </nav>
        </section>
        {creating ? <NewPrompt onCreated={choose} />
          : current && current.versions.length ? <PromptDetail key={current.name} p={current} initialB={newest} reload={(b) => load(b)} />
            : <Empty message="Create a prompt to version it here." />}
      </div>
    </>
  );
}
