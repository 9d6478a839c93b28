import { useState } from 'react';
import { Link } from 'react-router-dom';
import { api } from '../lib/api';
import { fmtCost, fmtNum } from '../lib/format';
import { Empty, ErrorBox, Loading, PageHead, Table, usePoll, useTitle } from '../components/ui';

const STATES = ['submitted', 'running', 'waiting', 'done', 'failed', 'timeout', 'rejected', 'cancelled', 'budget_exceeded'];

function seconds(v: number | null | undefined) {
  if (v === null || v === undefined) return '—';
  return v < 1 ? `${Math.round(v * 1000)} ms` : `${Number(v).toFixed(2)} s`;
}

function Card({ label, value, testid }: { label: string; value: string; testid?: string }) {
  return <div className="card" data-testid={testid}><div className="label">{label}</div><div className="value">{value}</div></div>;
}

export default function OverviewPage() {
  useTitle('Overview');
  const [data, setData] = useState<any>(null);
  const [problem, setProblem] = useState<unknown>(null);
  usePoll(async () => { setData(await api('/admin/overview')); setProblem(null); }, 5000, setProblem);
  let body = <Loading />;
  if (data) {
    const t = data.tasks || {};
    const byState = t.by_state || {};
    const max = Math.max(1, ...(Object.values(byState) as number[]));
    const states = [...STATES, ...Object.keys(byState).filter((s) => !STATES.includes(s))];
    const d = data.duration_s || {};
    const tokens = data.tokens || {};
    body = (
      <>
        <div className="cards">
          <Card label={`Tasks (${data.window_hours || 24} h)`} value={fmtNum(t.total ?? 0)} testid="ov-total" />
          <Card label="Failure rate" value={`${((data.failure_rate || 0) * 100).toFixed(1)} %`} />
          <Card label="Tokens" value={fmtNum(tokens.total ?? 0)} testid="ov-tokens" />
          <Card label="Cost" value={fmtCost(data.cost ?? 0)} />
          <Card label="p50 duration" value={seconds(d.p50)} testid="ov-p50" />
          <Card label="p95 duration" value={seconds(d.p95)} testid="ov-p95" />
        </div>
        <div className="grid-2">
          <section className="panel" aria-labelledby="ov-states">
            <h2 id="ov-states">Tasks by state</h2>
            {t.total ? (
              <div className="bars">{states.map((s) => (
                <div className="bar" key={s}>
                  <span>{s}</span>
                  <div className="track" role="img" aria-label={`${s}: ${byState[s] || 0}`}>
                    <div className={`fill ${s}`} style={{ width: `${((byState[s] || 0) / max) * 100}%` }} />
                  </div>
                  <span className="num">{fmtNum(byState[s] || 0)}</span>
                </div>
              ))}</div>
            ) : <Empty message="No tasks in the last 24 hours."><Link to="/editor">Draw a workflow</Link></Empty>}
          </section>
          <section className="panel" aria-labelledby="ov-tok">
            <h2 id="ov-tok">Tokens and cost</h2>
            <dl className="kv">
              <dt>Prompt tokens</dt><dd>{fmtNum(tokens.prompt ?? 0)}</dd>
              <dt>Completion tokens</dt><dd>{fmtNum(tokens.completion ?? 0)}</dd>
              <dt>Cost</dt><dd>{fmtCost(data.cost ?? 0)}</dd>
              <dt>Tasks per hour</dt><dd>{t.per_hour ?? '—'}</dd>
              <dt>Durations measured</dt><dd>{fmtNum(d.count ?? 0)}</dd>
            </dl>
            <h3>Top failing nodes</h3>
            {(data.top_failing_nodes || []).length ? (
              <Table caption="Top failing nodes" rows={data.top_failing_nodes} columns={[
                { label: 'Node', cell: (r: any) => <code>{r.node_id}</code> },
                { label: 'Kind', cell: (r: any) => r.kind || '—' },
                { label: 'Failures', className: 'num', cell: (r: any) => fmtNum(r.failures) },
              ]} />
            ) : <Empty message="No node failed in the last 24 hours." />}
          </section>
        </div>
      </>
    );
  }
  return (
    <>
      <PageHead title="Overview"><span className="muted small">updates every 5 s</span></PageHead>
      <ErrorBox error={problem} />
      <div aria-live="polite">{body}</div>
    </>
  );
}
