// The delivery log of completion callbacks (`/api/v1/callbacks`): each POST Agentix makes (or
// retries) to a task's `webhook` when the task ends — its status, attempts, last error — and a
// redelivery of one that was delivered or failed.

import { useCallback, useState } from 'react';
import { Link } from 'react-router-dom';
import { api, enc } from '../lib/api';
import { fmtTime } from '../lib/format';
import { DELIVERY_KIND, canRedeliver } from '../lib/triggers';
import { Badge, BusyButton, Empty, ErrorBox, Field, Loading, Select, Table, toast, usePoll } from './ui';

const STATUSES: [string, string][] = [['', 'any status'], ['waiting', 'waiting'], ['pending', 'pending'], ['delivered', 'delivered'], ['failed', 'failed']];

export function Deliveries() {
  const [status, setStatus] = useState('');
  const [items, setItems] = useState<any[] | null>(null);
  const [problem, setProblem] = useState<unknown>(null);
  const load = useCallback(async () => { setItems((await api('/callbacks', { query: { status, limit: 50 } })).items || []); setProblem(null); }, [status]);
  usePoll(load, 5000, setProblem);
  return (
    <section className="panel" aria-labelledby="deliveries-head">
      <h2 id="deliveries-head">Completion callbacks</h2>
      <p className="muted small">What Agentix posted to the <code>webhook</code> of your tasks (and of the tasks your hooks start) when they ended, newest first. Verify them with your signing secret (<code>GET /api/v1/callbacks/secret</code>).</p>
      <div className="toolbar"><Field label="Status"><Select name="delivery-status" options={STATUSES} value={status} onChange={(e) => { setStatus(e.target.value); setItems(null); }} /></Field></div>
      <ErrorBox error={problem} />
      <div data-testid="delivery-list">
        {items === null ? <Loading /> : !items.length ? <Empty message="No completion callback yet." /> : (
          <Table caption="Completion callbacks" rows={items} rowKey={(d) => d.id} rowProps={(d) => ({ 'data-delivery': d.id, 'data-status': d.status })} columns={[
            { label: 'Task', cell: (d) => <Link to={`/runs/${enc(d.task_id)}`}><code>{d.task_id}</code></Link> },
            { label: 'URL', cell: (d) => <code className="small">{d.url}</code> },
            { label: 'Status', cell: (d) => <Badge text={d.status} kind={DELIVERY_KIND[d.status] || d.status} /> },
            { label: 'Attempts', cell: (d) => String(d.attempts ?? 0) },
            { label: 'Last error', cell: (d) => (d.last_error || d.last_status_code ? <span className="small">{d.last_status_code ? `HTTP ${d.last_status_code}` : ''}{d.last_status_code && d.last_error ? ': ' : ''}{d.last_error || ''}</span> : '—') },
            { label: 'When', className: 'time', cell: (d) => (d.delivered_at ? `delivered ${fmtTime(d.delivered_at)}` : d.next_attempt_at && d.status === 'pending' ? `next try ${fmtTime(d.next_attempt_at)}` : fmtTime(d.created_at)) },
            { label: 'Actions', cell: (d) => (canRedeliver(d) ? (
              <BusyButton className="small" aria-label={`Redeliver ${d.id}`} action={async () => {
                await api(`/callbacks/${enc(d.id)}/redeliver`, { method: 'POST' });
                toast('Sent again.', 'ok');
                await load();
              }}>Redeliver</BusyButton>
            ) : null) },
          ]} />
        )}
      </div>
    </section>
  );
}
