import { useEffect, useState } from 'react';
import { api } from '../lib/api';
import { fmtAge, fmtNum, fmtTime } from '../lib/format';
import { Badge, Empty, ErrorBox, Loading, PageHead, Table, usePoll, useTitle } from '../components/ui';

const DEFAULT_INTERVAL_S = 5;

/** Heartbeat age now, from the age the server measured plus the time since we asked. */
export function liveAge(inst: any, fetchedAt: number, now = performance.now()) {
  return (inst.age_s ?? 0) + (now - fetchedAt) / 1000;
}

export function isStale(inst: any, fetchedAt: number, now = performance.now()) {
  const interval = inst.interval_s ?? inst.detail?.interval_s ?? DEFAULT_INTERVAL_S;
  return inst.healthy === false || inst.lost === true || liveAge(inst, fetchedAt, now) > 2 * interval;
}

function probeRows(infra: any) {
  return Object.entries(infra || {}).map(([name, v]: [string, any]) => ({ name, ...(v && typeof v === 'object' ? v : { ok: Boolean(v) }) }));
}

function probeDetail(p: any) {
  const rest = Object.entries(p).filter(([k]) => !['name', 'ok'].includes(k));
  return rest.length ? rest.map(([k, v]) => `${k}: ${typeof v === 'object' ? JSON.stringify(v) : v}`).join(' · ') : '—';
}

/** Breakers as the status API reports them: {model: {model, state, instances: [...]}} or a list. */
export function breakerRows(breakers: any) {
  const list: any[] = Array.isArray(breakers) ? breakers : Object.values(breakers || {});
  return list.map((b) => {
    const inst: any[] = b.instances || [];
    const failures = inst.reduce((s, i) => s + (i.failures || 0), b.failures || 0);
    const recent = [...(b.recent_failures || []), ...inst.flatMap((i) => i.recent_failures || [])];
    const lastError = b.last_error || inst.map((i) => i.last_error).find(Boolean) || null;
    return { model: b.model, state: b.state || 'closed', failures, recent: [...new Set(recent)].slice(-5), lastError, replicas: inst.length };
  });
}

export function BreakerTable({ breakers }: { breakers: any }) {
  const rows = breakerRows(breakers);
  if (!rows.length) return <Empty message="No breaker reported yet: dispatchers report them in their heartbeats once a model was called." />;
  return (
    <Table caption="Model breakers" rows={rows} rowProps={(r) => ({ 'data-model': r.model })} rowKey={(r) => r.model} columns={[
      { label: 'Model', cell: (r) => <strong>{r.model}</strong> },
      { label: 'Breaker', cell: (r) => <Badge text={r.state.replace('_', '-')} kind={r.state} /> },
      { label: 'Failures', className: 'num', cell: (r) => fmtNum(r.failures) },
      { label: 'Recent failures', className: 'wrap', cell: (r) => (r.recent.length ? <ul className="apply-list">{r.recent.map((f: string) => <li key={f}>{f}</li>)}</ul> : (r.lastError || '—')) },
      { label: 'Dispatchers', className: 'num', cell: (r) => fmtNum(r.replicas) },
    ]} />
  );
}

/** Work queues (tasks, ingest): backlog, in flight, redelivered, and dead letters waiting. */
export function QueueTable({ queues }: { queues: any }) {
  const rows = Object.entries(queues || {}).map(([name, q]: [string, any]) => ({ name, ...q }));
  if (!rows.length) return <Empty message="Queue state is unavailable while NATS is unreachable." />;
  return (
    <Table caption="Work queues" rows={rows} rowKey={(r) => r.name} rowProps={(r) => ({ 'data-queue': r.name })} columns={[
      { label: 'Queue', cell: (r) => <strong>{r.name}</strong> },
      { label: 'Waiting', className: 'num', cell: (r) => (r.ok ? fmtNum(r.waiting) : <Badge text={r.error || 'unavailable'} kind="error" />) },
      { label: 'In flight', className: 'num', cell: (r) => (r.ok ? fmtNum(r.in_flight) : '—') },
      { label: 'Redelivered', className: 'num', cell: (r) => (r.ok ? fmtNum(r.redelivered) : '—') },
      { label: 'Dead letters', className: 'num', cell: (r) => (r.dead_letters ? <Badge text={fmtNum(r.dead_letters)} kind="error" /> : (r.dead_letters === 0 ? '0' : '—')) },
    ]} />
  );
}

export default function StatusPage() {
  useTitle('Status');
  const [data, setData] = useState<{ body: any; fetchedAt: number } | null>(null);
  const [problem, setProblem] = useState<unknown>(null);
  const [now, setNow] = useState(() => performance.now());
  usePoll(async () => {
    const started = performance.now();
    const body = await api('/admin/status');
    setData({ body, fetchedAt: started });
    setProblem(null);
  }, 2000, setProblem);
  // Ages and stale marks move between polls, so "stale" appears the moment it is.
  useEffect(() => { const t = setInterval(() => setNow(performance.now()), 500); return () => clearInterval(t); }, []);

  const body = data?.body;
  const fetchedAt = data?.fetchedAt ?? 0;
  const instances = body ? [...(body.instances || []), ...(body.lost || []).map((i: any) => ({ ...i, lost: true }))] : [];
  const tools: any[] = [];
  for (const [service, entry] of Object.entries(body?.tools || {}) as [string, any][]) {
    for (const t of entry.tools || []) tools.push({ service, instances: entry.instances, ...t });
  }
  const probes = probeRows(body?.infrastructure || body?.infra);
  return (
    <>
      <PageHead title="Status"><span className="muted small">live: polled every 2 s</span></PageHead>
      <ErrorBox error={problem} />
      <section className="panel" aria-labelledby="st-inst"><h2 id="st-inst">Service instances</h2>
        <div data-testid="instances">
          {!body ? <Loading /> : instances.length ? (
            <Table caption="Service instances" rows={instances} rowKey={(r) => r.instance}
              rowProps={(r) => ({ className: isStale(r, fetchedAt, now) ? 'stale' : '', 'data-instance': r.instance })}
              columns={[
                { label: 'Service', cell: (r) => <strong>{r.service}</strong> },
                { label: 'Instance', cell: (r) => <code>{r.instance}</code> },
                { label: 'Version', cell: (r) => r.version || '—' },
                { label: 'Started', className: 'time', cell: (r) => fmtTime(r.started_at) },
                { label: 'Heartbeat age', className: 'num', cell: (r) => <span className="age" data-instance={r.instance}>{fmtAge(liveAge(r, fetchedAt, now))}</span> },
                { label: 'Load', className: 'num', cell: (r) => (r.load ? `${r.load.inflight ?? 0} running · ${r.load.done ?? 0} done` : '—') },
                { label: 'State', cell: (r) => <span className="state" data-instance={r.instance}>{isStale(r, fetchedAt, now) ? <Badge text="stale" /> : <Badge text="healthy" />}</span> },
              ]} />
          ) : <Empty message="No service has sent a heartbeat yet." />}
        </div>
      </section>
      <div className="grid-2">
        <section className="panel" aria-labelledby="st-infra"><h2 id="st-infra">Infrastructure</h2>
          {probes.length ? (
            <Table caption="Infrastructure probes" rows={probes} rowKey={(r) => r.name} columns={[
              { label: 'Probe', cell: (r: any) => <strong>{r.name}</strong> },
              { label: 'State', cell: (r: any) => (r.configured === false ? <Badge text="not configured" kind="disabled" /> : <Badge text={r.ok ? 'ok' : 'failing'} kind={r.ok ? 'ok' : 'error'} />) },
              { label: 'Detail', className: 'wrap', cell: probeDetail },
            ]} />
          ) : body ? <Empty message="No probe results." /> : null}
        </section>
        <section className="panel" aria-labelledby="st-br"><h2 id="st-br">Model breakers</h2>{body ? <BreakerTable breakers={body.breakers} /> : null}</section>
      </div>
      <section className="panel" aria-labelledby="st-queues"><h2 id="st-queues">Work queues</h2>
        <div data-testid="queues">{body ? <QueueTable queues={body.queues} /> : null}</div></section>
      <section className="panel" aria-labelledby="st-tools"><h2 id="st-tools">Tool registry</h2>
        {tools.length ? (
          <Table caption="Tool registry" rows={tools} rowKey={(r) => `${r.service}.${r.name}`} columns={[
            { label: 'Service', cell: (r) => `${r.service} (${r.instances})` },
            { label: 'Tool', cell: (r) => <code>{r.name}</code> },
            { label: 'Requests', className: 'num', cell: (r) => fmtNum(r.requests) },
            { label: 'Errors', className: 'num', cell: (r) => (r.errors ? <Badge text={fmtNum(r.errors)} kind="error" /> : '0') },
            { label: 'Avg latency', className: 'num', cell: (r) => (r.avg_latency_ms === null || r.avg_latency_ms === undefined ? '—' : `${Number(r.avg_latency_ms).toFixed(2)} ms`) },
            { label: 'Last error', className: 'wrap', cell: (r) => r.last_error || '—' },
          ]} />
        ) : body ? <Empty message="No tool service answered." /> : null}
      </section>
    </>
  );
}
