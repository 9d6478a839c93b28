// The run viewer's state, folded from the task's event stream. Pure functions: the same events
// give the same state, and an event is applied at most once (by its stream id), so a replay
// after a reconnect can never double a token.

const LOG_LIMIT = 400;
const STORE_PREFIX = 'agentix.run.';
// Streamed pieces (text, reasoning, a tool call's arguments): shown in their node, not in the event log.
const STREAMED = new Set(['token', 'thinking.start', 'thinking.delta', 'thinking.end', 'tool.input']);

export type RunState = ReturnType<typeof initialState>;

export function initialState(taskId: string) {
  return {
    taskId,
    lastId: null as string | null, // last applied SSE id: where a resumed stream continues
    lastN: null as number | null, // per-task event counter `n`, to notice gaps
    gaps: 0,
    duplicates: 0,
    status: 'submitted' as string,
    error: null as string | null,
    output: undefined as unknown,
    usage: null as any,
    budget: null as { used: number; limit: number } | null,
    chainRevision: null as number | null,
    finished: false,
    retry: 0, // how many retries the stream has shown (status events carry `retry`)
    waitingNode: null as string | null,
    nodes: {} as Record<string, any>,
    errors: [] as { code: string; message: string; node_id: string | null }[],
    guardrails: [] as any[],
    log: [] as { id: string; ts: string; type: string; node: string | null; text: string }[],
  };
}

function node(state: RunState, id: string | undefined) {
  const key = id || '(task)';
  if (!state.nodes[key]) {
    state.nodes[key] = {
      id: key, kind: null, status: 'pending', startedAt: null, durationMs: null, text: '', thinking: '',
      tools: [], branch: null, evals: [], guardrails: [], experts: [], approval: null, error: null,
      outputPreview: null, usage: null,
    };
  }
  return state.nodes[key];
}

function summary(type, d) {
  switch (type) {
    case 'status': return `status → ${d.status}${d.error ? ` (${d.error})` : ''}`;
    case 'node.start': return `start (${d.kind})`;
    case 'node.end': return `end ${d.status} in ${Math.round(d.duration_ms ?? 0)} ms${d.error ? `: ${d.error}` : ''}`;
    case 'node.skip': return 'skipped';
    case 'tool.call': return `call ${d.tool}`;
    case 'tool.result': return `result ${d.ok ? 'ok' : 'error'} (${Math.round(d.duration_ms ?? 0)} ms)`;
    case 'branch': return `branch → ${d.handle}`;
    case 'approval.request': return 'waiting for approval';
    case 'approval.decision': return `${d.decision} by ${d.by}`;
    case 'expert.start': return `expert ${d.name} started`;
    case 'expert.end': return `expert ${d.name} ${d.status}`;
    case 'eval': return `eval ${d.score} (${d.grade})${d.regenerated ? ', regenerated' : ''}`;
    case 'guardrail': return `guardrail tier ${d.tier}: ${d.action} — ${d.reason}`;
    case 'budget': return `budget ${d.used}/${d.limit}`;
    case 'error': return `error ${d.code}: ${d.message}`;
    case 'done': return `done: ${d.status}`;
    default: return type;
  }
}

/**
 * Apply one SSE message `{id, event, data}` to `state` (mutated in place). Returns false, and
 * counts a duplicate, when an event with this id or an earlier one was applied already.
 */
export function applyEvent(state: RunState, { id, event, data }: { id: string | null; event: string; data: any }): boolean {
  const seq = id === null || id === undefined ? null : Number(id);
  if (seq !== null && state.lastId !== null && seq <= Number(state.lastId)) {
    state.duplicates += 1;
    return false;
  }
  if (seq !== null) state.lastId = String(id);
  if (typeof data.n === 'number') {
    if (state.lastN !== null && data.n > state.lastN + 1) state.gaps += data.n - state.lastN - 1;
    state.lastN = Math.max(state.lastN ?? -1, data.n);
  }
  const nid = data.node_id;
  if (!STREAMED.has(event)) {
    state.log.push({ id: String(id ?? ''), ts: data.ts, type: event, node: nid || null, text: summary(event, data) });
    if (state.log.length > LOG_LIMIT) state.log.splice(0, state.log.length - LOG_LIMIT);
  }
  switch (event) {
    case 'status':
      state.status = data.status;
      if (data.error) state.error = data.error;
      if (data.chain_revision !== undefined && data.chain_revision !== null) state.chainRevision = data.chain_revision;
      if (typeof data.retry === 'number' && data.retry > (state.retry || 0)) {
        state.retry = data.retry; // a retried run goes on: it is not finished any more
        state.finished = false;
        state.error = null;
        state.output = undefined;
      }
      if (data.status !== 'waiting') state.waitingNode = null;
      // A parked task (`waiting`) says what it spent so far; `done` brings the total later.
      if (data.usage) state.usage = data.usage;
      break;
    case 'node.start': {
      const n = node(state, nid);
      n.status = 'running';
      n.kind = data.kind || n.kind;
      n.startedAt = data.ts;
      n.error = null;
      break;
    }
    case 'node.end': {
      const n = node(state, nid);
      n.status = data.status;
      n.durationMs = data.duration_ms;
      n.outputPreview = data.output_preview ?? n.outputPreview;
      n.error = data.error || null;
      if (data.usage) n.usage = data.usage;
      if (state.waitingNode === nid) state.waitingNode = null;
      break;
    }
    case 'node.skip':
      node(state, nid).status = 'skipped';
      break;
    case 'token':
      node(state, nid).text += data.text || '';
      break;
    case 'thinking.delta':
      node(state, nid).thinking += data.text || '';
      break;
    case 'tool.call':
      node(state, nid).tools.push({ call_id: data.call_id, tool: data.tool, args: data.args, result: undefined });
      break;
    case 'tool.result': {
      const n = node(state, nid);
      let call = n.tools.find((t: any) => t.call_id === data.call_id);
      if (!call) { call = { call_id: data.call_id, tool: '?', args: {} }; n.tools.push(call); }
      Object.assign(call, { result: data.result_preview, ok: data.ok, error: data.error, duration_ms: data.duration_ms });
      break;
    }
    case 'branch':
      node(state, nid).branch = data.handle;
      break;
    case 'approval.request': {
      const n = node(state, nid);
      n.status = 'waiting';
      n.approval = { message: data.message, timeout_s: data.timeout_s };
      state.waitingNode = nid;
      break;
    }
    case 'approval.decision': {
      const n = node(state, nid);
      n.approval = { ...(n.approval || {}), decision: data.decision, by: data.by, comment: data.comment };
      if (n.status === 'waiting') n.status = data.decision === 'approve' ? 'running' : 'failed';
      if (state.waitingNode === nid) state.waitingNode = null;
      break;
    }
    case 'expert.start':
      node(state, nid).experts.push({ name: data.name, brief: data.brief, status: 'running' });
      break;
    case 'expert.end': {
      const ex = node(state, nid).experts.find((e: any) => e.name === data.name && e.status === 'running');
      if (ex) ex.status = data.status;
      break;
    }
    case 'eval':
      node(state, nid).evals.push({ score: data.score, grade: data.grade, regenerated: data.regenerated, reasons: data.reasons || [] });
      break;
    case 'guardrail':
      (nid ? node(state, nid).guardrails : state.guardrails).push({ tier: data.tier, action: data.action, reason: data.reason });
      break;
    case 'budget':
      state.budget = { used: data.used, limit: data.limit };
      break;
    case 'error':
      state.errors.push({ code: data.code, message: data.message, node_id: nid || null });
      if (nid) node(state, nid).error = data.message;
      break;
    case 'done':
      state.status = data.status;
      state.output = data.output;
      if (data.usage) state.usage = data.usage;
      if (data.error) state.error = data.error;
      state.finished = true;
      state.waitingNode = null;
      break;
    default:
      break;
  }
  return true;
}

/** Keep the folded state with its last id, so a reload resumes with ?after=<id> and loses nothing. */
export function saveState(state: RunState): boolean {
  const key = STORE_PREFIX + state.taskId;
  const value = JSON.stringify(state);
  try {
    sessionStorage.setItem(key, value);
    return true;
  } catch {
    // Over quota: drop the other runs' states (they can replay from their start), retry once.
    for (const k of Object.keys(sessionStorage)) if (k.startsWith(STORE_PREFIX) && k !== key) sessionStorage.removeItem(k);
    try {
      sessionStorage.setItem(key, value);
      return true;
    } catch {
      // Still too big: forget it; the next load replays this stream from the start (still exact).
      sessionStorage.removeItem(key);
      return false;
    }
  }
}

export function loadState(taskId: string): RunState | null {
  try {
    const raw = sessionStorage.getItem(STORE_PREFIX + taskId);
    const state = raw ? JSON.parse(raw) : null;
    return state && state.taskId === taskId ? state : null;
  } catch {
    return null;
  }
}

export function forgetState(taskId: string) {
  sessionStorage.removeItem(STORE_PREFIX + taskId);
}
