import { useEffect, useState } from 'react';
import { Link, useSearchParams } from 'react-router-dom';
import { api } from '../lib/api';
import { durationOf, fmtCost, fmtMs, fmtNum, fmtTime } from '../lib/format';
import { Badge, Empty, ErrorBox, Field, Loading, PageHead, Select, Table, usePager, useTitle } from '../components/ui';

export const STATES = ['submitted', 'running', 'waiting', 'done', 'failed', 'timeout', 'rejected', 'cancelled', 'budget_exceeded'];

export default function RunsPage() {
  useTitle('Runs');
  const [query, setQuery] = useSearchParams();
  const [status, setStatus] = useState(query.get('status') || '');
  const sizes = ['10', '25', '50', '100'];
  const wanted = query.get('limit');
  const [size, setSize] = useState(wanted || '25');
  const [problem, setProblem] = useState<unknown>(null);
  const pages = usePager<any>((cursor) => api('/tasks', { query: { status, limit: size, cursor } }), setProblem);
  useEffect(() => {
    const q = new URLSearchParams();
    if (status) q.set('status', status);
    if (size !== '25') q.set('limit', size);
    setQuery(q, { replace: true });
    setProblem(null);
    pages.reset();
  }, [status, size]); // eslint-disable-line react-hooks/exhaustive-deps
  const items = pages.items;
  return (
    <>
      <PageHead title="Runs"><Link className="button" to="/runs/new">New run</Link><Link className="button primary" to="/editor">Draw a workflow</Link></PageHead>
      <div className="toolbar">
        <Field label="State"><Select name="status" value={status} onChange={(e) => setStatus(e.target.value)} options={[['', 'any state'], ...STATES.map((s) => [s, s] as [string, string])]} /></Field>
        <Field label="Page size"><Select name="limit" value={size} onChange={(e) => setSize(e.target.value)} options={sizes.includes(size) ? sizes : [...sizes, size]} /></Field>
        <div className="field"><label aria-hidden="true">{'\u00a0'}</label><button type="button" onClick={() => pages.reload()}>Refresh</button></div>
      </div>
      <ErrorBox error={problem} />
      <div data-testid="task-list">
        {items === null ? <Loading /> : items.length ? (
          <Table caption="Tasks" rows={items} rowKey={(t) => t.id} rowProps={(t) => ({ 'data-task': t.id })} columns={[
            { label: 'Task', cell: (t) => <Link to={`/runs/${encodeURIComponent(t.id)}`}><code>{t.id}</code></Link> },
            { label: 'State', cell: (t) => <Badge text={t.status} /> },
            { label: 'Created', className: 'time', cell: (t) => fmtTime(t.created_at) },
            { label: 'Duration', className: 'num', cell: (t) => (t.started_at ? fmtMs(durationOf(t.started_at, t.finished_at)) : '—') },
            { label: 'Tokens', className: 'num', cell: (t) => fmtNum((t.usage?.prompt_tokens || 0) + (t.usage?.completion_tokens || 0)) },
            { label: 'Cost', className: 'num', cell: (t) => fmtCost(t.usage?.cost) },
            { label: 'User', cell: (t) => t.user_id || '—' },
            { label: 'Error', className: 'wrap', cell: (t) => t.error || '' },
          ]} />
        ) : <Empty message={status ? `No ${status} task.` : 'No run yet.'}><Link className="button primary" to="/editor">Draw a workflow</Link></Empty>}
      </div>
      {pages.controls}
    </>
  );
}
