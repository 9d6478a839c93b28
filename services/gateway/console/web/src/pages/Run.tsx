// The run viewer: the graph coloured live from the task's event stream, the selected node's
// tokens, tool calls, branch decisions, evaluations and usage; approve/reject, cancel, retry.
// The folded state is kept in sessionStorage with its last event id, so a reload resumes with
// ?after=<id> and the text continues without a gap or a duplicate.

import { useEffect, useLayoutEffect, useRef, useState } from 'react';
import { Link, useParams } from 'react-router-dom';
import { api } from '../lib/api';
import { durationOf, fmtCost, fmtJson, fmtMs, fmtNum, fmtTime } from '../lib/format';
import { STATUS_MARK, type Dsl, type DslNode } from '../lib/dsl';
import { useRunStream } from '../lib/useRunStream';
import type { RunState } from '../lib/runstate';
import { Badge, BusyButton, Empty, ErrorBox, toast, useTitle } from '../components/ui';
import { NodeTrace } from '../components/NodeTrace';
import { RunGraph } from '../graph/RunGraph';
import { DSL_CACHE } from './Submit';

const TERMINAL = new Set(['done', 'failed', 'timeout', 'rejected', 'cancelled', 'budget_exceeded']);

async function graphOf(task: any): Promise<{ dsl: Dsl; exact: boolean }> {
  if (task.dsl && Array.isArray(task.dsl.nodes)) return { dsl: task.dsl, exact: true };
  try {
    const cached = JSON.parse(sessionStorage.getItem(DSL_CACHE + task.id) || 'null');
    if (cached && Array.isArray(cached.nodes)) return { dsl: cached, exact: true };
  } catch { /* fall through */ }
  if (task.workflow_id) {
    try {
      const wf = await api(`/workflows/${encodeURIComponent(task.workflow_id)}`);
      if (wf.dsl) return { dsl: wf.dsl, exact: false };
    } catch { /* deleted workflow: fall through */ }
  }
  // Last resort: the nodes the task record lists, without edges.
  return { dsl: { version: '1', nodes: (task.nodes || []).map((n: any) => ({ id: n.id, kind: n.kind || '?' })), edges: [] }, exact: false };
}

/** The node to show when the reader has not picked one: the one asking, else the one talking. */
export function autoPick(state: RunState, known: Set<string>): string | null {
  const nodes = Object.values(state.nodes).filter((n: any) => known.has(n.id));
  return state.waitingNode
    || nodes.filter((n: any) => n.status === 'running' && n.text).map((n: any) => n.id).pop()
    || nodes.filter((n: any) => n.text).map((n: any) => n.id).pop()
    || nodes.filter((n: any) => n.status === 'running').map((n: any) => n.id).pop()
    || null;
}

function ApprovalBox({ taskId, nodeId, message }: { taskId: string; nodeId: string; message: string }) {
  const [comment, setComment] = useState('');
  const [said, setSaid] = useState<{ ok?: string; error?: unknown } | null>(null);
  const decide = async (decision: string) => {
    try {
      await api(`/tasks/${encodeURIComponent(taskId)}/approval`, { method: 'POST', body: { decision, comment: comment || null, node_id: nodeId } });
      setSaid({ ok: `${decision === 'approve' ? 'Approved' : 'Rejected'}; the run continues.` });
    } catch (err) { setSaid({ error: err }); }
  };
  return (
    <section className="approval-box" aria-labelledby="approval-title">
      <h2 id="approval-title">Approval needed at <code>{nodeId}</code></h2>
      <pre>{message || '(no message)'}</pre>
      <div className="field"><label htmlFor="approval-comment">Comment (optional)</label>
        <textarea rows={2} id="approval-comment" style={{ fontFamily: 'inherit' }} value={comment} onChange={(e) => setComment(e.target.value)} /></div>
      <div className="actions">
        <BusyButton className="ok solid" data-action="approve" action={() => decide('approve')}>Approve</BusyButton>
        <BusyButton className="danger solid" data-action="reject" action={() => decide('reject')}>Reject</BusyButton>
      </div>
      <div aria-live="polite">{said?.ok ? <div className="notice ok">{said.ok}</div> : <ErrorBox error={said?.error} />}</div>
    </section>
  );
}

function EventLog({ log }: { log: RunState['log'] }) {
  const ref = useRef<HTMLDivElement>(null);
  const atBottom = useRef(true);
  useLayoutEffect(() => { const el = ref.current; if (el && atBottom.current) el.scrollTop = el.scrollHeight; });
  return (
    <div className="log" tabIndex={0} aria-label="Event log" ref={ref}
      onScroll={(ev) => { const el = ev.currentTarget; atBottom.current = el.scrollHeight - el.scrollTop - el.clientHeight < 24; }}>
      <ol>
        {log.length ? log.map((e, i) => (
          <li key={`${e.id}-${i}`}><span className="id">{e.id}</span><span className="node">{e.node || ''}</span>
            <span>{e.type === 'status' || e.type === 'done' ? <strong>{e.text}</strong> : e.text}</span></li>
        )) : <li className="muted">No event yet.</li>}
      </ol>
    </div>
  );
}

export default function RunPage() {
  const taskId = decodeURIComponent(useParams().id!);
  useTitle(`Run ${taskId}`);
  const [task, setTask] = useState<any>(null);
  const [graph, setGraph] = useState<{ dsl: Dsl; exact: boolean } | null>(null);
  const [loadError, setLoadError] = useState<unknown>(null);
  const [problem, setProblem] = useState<unknown>(null);
  const [picked, setPicked] = useState<string | null>(null);
  const refreshTask = async () => {
    try { setTask(await api(`/tasks/${encodeURIComponent(taskId)}`)); } catch (err) { setProblem(err); }
  };
  const { state, conn, follow } = useRunStream(taskId, { onEnded: refreshTask });

  useEffect(() => {
    let gone = false;
    (async () => {
      let t;
      try { t = await api(`/tasks/${encodeURIComponent(taskId)}`); } catch (err) { if (!gone) setLoadError(err); return; }
      const g = await graphOf(t);
      if (gone) return;
      setTask(t);
      setGraph(g);
      // Retried since this state was saved (here or elsewhere): follow the reopened run.
      if (state!.finished && (t.retry || 0) > (state!.retry || 0)) state!.finished = false;
      if (!state!.finished) follow();
    })();
    return () => { gone = true; };
  }, [taskId]); // eslint-disable-line react-hooks/exhaustive-deps

  if (loadError) return <><h1>Run <code>{taskId}</code></h1><ErrorBox error={loadError} /><Link to="/runs">All runs</Link></>;
  const s = state!;
  const dslNodes = new Map<string, DslNode>((graph?.dsl.nodes || []).map((n) => [n.id, n]));
  const selected = picked ?? autoPick(s, new Set(dslNodes.keys()));
  const statuses = Object.fromEntries([...dslNodes.keys()].map((id) => [id, s.nodes[id] ? s.nodes[id].status : 'pending']));
  const usage = s.usage || task?.usage || {};
  const terminal = TERMINAL.has(s.status) && s.finished;
  const retryable = ['failed', 'timeout'].includes(s.status);
  const hasOutput = s.output !== undefined && s.output !== null;
  const connText = ({ connecting: 'connecting…', reconnecting: `reconnecting${conn.detail?.attempt ? ` (attempt ${conn.detail.attempt})` : ''}…`, ended: 'stream ended', idle: s.finished ? 'finished' : '' } as Record<string, string>)[conn.state] ?? conn.state;
  return (
    <div className="run" data-task={taskId} data-last-id={s.lastId ?? ''} data-duplicates={String(s.duplicates)} data-gaps={String(s.gaps)} data-finished={String(s.finished)}>
      <div className="page-head run-head">
        <h1>Run <code>{taskId}</code></h1>
        <span data-testid="run-status"><Badge text={s.status} /></span>
        <span className="conn muted" aria-live="polite" data-testid="conn" data-state={conn.state}>{conn.state === 'open' ? <span className="badge badge-running">● live</span> : connText}</span>
        <div className="actions">
          <BusyButton className="danger" disabled={terminal} data-action="cancel" action={async () => {
            await api(`/tasks/${encodeURIComponent(taskId)}/cancel`, { method: 'POST' });
            toast('Cancellation requested.');
          }}>Cancel</BusyButton>
          <BusyButton disabled={!retryable} data-action="retry" title={retryable ? 'Run the failed part again' : 'Only a failed or timed-out run can be retried'} action={async () => {
            await api(`/tasks/${encodeURIComponent(taskId)}/retry`, { method: 'POST' });
            toast('Retry submitted.');
            s.finished = false;
            follow();
          }}>Retry</BusyButton>
          <Link className="button" to="/runs/new">New run</Link>
        </div>
      </div>
      <div className="meta">
        <span>created {fmtTime(task?.created_at)}</span>
        {task?.started_at ? <span>ran {fmtMs(durationOf(task.started_at, s.finished ? task.finished_at : null))}</span> : null}
        <span data-testid="usage">{`${fmtNum(usage.prompt_tokens ?? 0)} prompt + ${fmtNum(usage.completion_tokens ?? 0)} completion tokens · ${fmtCost(usage.cost ?? 0)}`}</span>
        {s.budget ? <span>{`budget ${fmtNum(s.budget.used)} / ${fmtNum(s.budget.limit)}`}</span> : null}
        {s.chainRevision !== null ? <span>{`model chain revision ${s.chainRevision}`}</span> : null}
        {s.gaps ? <span className="badge badge-warn">{`${s.gaps} events missing (trimmed by retention)`}</span> : null}
        {s.status === 'submitted' && !s.log.length ? <span className="badge badge-waiting">queued: waiting for a dispatcher</span> : null}
      </div>
      <ErrorBox error={problem ?? (conn.state === 'error' ? conn.detail?.error : null)} />
      <div data-testid="approval">
        {s.waitingNode ? <ApprovalBox key={s.waitingNode} taskId={taskId} nodeId={s.waitingNode} message={s.nodes[s.waitingNode]?.approval?.message} /> : null}
      </div>
      <section className="panel" aria-labelledby="run-graph">
        <h2 id="run-graph">Graph</h2>
        <div data-testid="graph">
          {graph ? <RunGraph dsl={graph.dsl} statuses={statuses} selected={selected} onSelect={setPicked} label={`Graph of run ${taskId}`} /> : <p className="muted">Loading…</p>}
        </div>
        {graph && !graph.exact ? (
          <p className="muted small">{graph.dsl.edges.length
            ? 'Graph drawn from the saved workflow (it may have changed since this run).'
            : 'This run’s workflow was not available to the console: nodes are shown without their edges.'}</p>
        ) : null}
        <div className="legend" aria-hidden="true">{Object.entries(STATUS_MARK).map(([st, m]) => <span key={st}>{`${m} ${st}`}</span>)}</div>
      </section>
      <div className="run-body">
        <NodeTrace nodeId={selected} state={s} def={selected ? dslNodes.get(selected) : undefined} />
        <div>
          <section className="panel" data-testid="output">
            <h2>Result</h2>
            {s.error ? <ErrorBox error={new Error(s.error)} /> : null}
            {s.errors.length ? <ul>{s.errors.map((e, i) => <li key={i}><code>{e.code}</code>{e.node_id ? ` at ${e.node_id}` : ''}{`: ${e.message}`}</li>)}</ul> : null}
            {hasOutput ? <pre className="tokens" data-testid="final-output" tabIndex={0}>{fmtJson(s.output)}</pre>
              : <Empty message={s.finished ? 'The run ended without an output.' : 'The output appears when the run finishes.'} />}
          </section>
          <section className="panel" aria-labelledby="run-log"><h2 id="run-log">Events</h2><EventLog log={s.log} /></section>
        </div>
      </div>
    </div>
  );
}
