// A chat run's live answer, folded from its event stream (GET /runs/{id}/events). Pure: the same
// events give the same answer, and an event is applied at most once (by its stream id), so a
// replay after a reconnect or a reload never doubles a token. The answer is a list of parts in
// the order they came: text, thinking blocks and tool steps. It is only a preview: once the run
// is done, the stored messages replace it (they are the truth).

const PLAN_NODE = 'plan'; // the plan-mode agent whose tokens are the plan's JSON, not the answer

export type Answer = ReturnType<typeof initialAnswer>;

export function initialAnswer(runId: string) {
  return {
    runId,
    lastId: null as string | null,
    duplicates: 0,
    status: 'submitted' as string,
    queued: null as number | null, // runs ahead of this one while it waits its turn
    parts: [] as any[],
    planText: '',
    plan: null as string[] | null, // [step, …] from a `plan` event, else read from the plan agent's JSON
    approval: null as any, // {kind: 'plan' | 'tool', message, tool, args, nodeId} while one is asked
    decision: null as any,
    errors: [] as { code: string; message: string }[],
    finished: false,
    lastBeat: null as unknown, // the ts of the last `heartbeat`: the model is quiet but the run is alive
  };
}

function lastPart(answer: Answer, type: string) {
  const part = answer.parts[answer.parts.length - 1];
  return part && part.type === type ? part : null;
}

function addText(answer, text) {
  const open = lastPart(answer, 'thinking');
  if (open && open.legacy) open.done = true; // `thinking` has no end event: text closes it
  const part = lastPart(answer, 'text') || (answer.parts.push({ type: 'text', text: '' }), lastPart(answer, 'text'));
  part.text += text;
}

function thinkingPart(answer, fresh, legacy = false) {
  const part = lastPart(answer, 'thinking');
  if (part && !part.done && !fresh) return part;
  answer.parts.push({ type: 'thinking', text: '', done: false, legacy });
  return lastPart(answer, 'thinking');
}

function toolPart(answer, callId, tool) {
  let part = answer.parts.find((p) => p.type === 'tool' && p.callId === callId);
  if (!part) {
    part = { type: 'tool', callId, tool: tool || '?', args: undefined, argsText: '', result: undefined, ok: undefined, error: null, durationMs: null };
    answer.parts.push(part);
  }
  if (tool) part.tool = tool;
  return part;
}

/** The steps of a plan agent's JSON output (`{"steps": [...]}`), or null while it is not whole. */
export function planSteps(text: string): string[] | null {
  try {
    const value = JSON.parse(text);
    const steps = Array.isArray(value) ? value : value && value.steps;
    return Array.isArray(steps) ? steps.map((s) => (typeof s === 'string' ? s : JSON.stringify(s))) : null;
  } catch {
    return null;
  }
}

/**
 * Apply one SSE message `{id, event, data}` (mutates `answer`). Returns false for an event at or
 * before the last applied id (a replayed duplicate).
 */
export function applyRunEvent(answer: Answer, { id, event, data = {} }: { id: string | null; event: string; data?: any }): boolean {
  const seq = id === null || id === undefined || id === '' ? null : Number(id);
  if (seq !== null && answer.lastId !== null && seq <= Number(answer.lastId)) {
    answer.duplicates += 1;
    return false;
  }
  if (seq !== null) answer.lastId = String(id);
  switch (event) {
    case 'queued':
      answer.queued = data.position ?? null;
      break;
    case 'status':
      answer.status = data.status;
      if (data.status !== 'submitted') answer.queued = null;
      break;
    case 'token':
      if (data.node_id === PLAN_NODE) {
        answer.planText += data.text || '';
        answer.plan = planSteps(answer.planText) || answer.plan;
      } else {
        addText(answer, data.text || '');
      }
      break;
    case 'thinking':
      thinkingPart(answer, false, true).text += data.text || '';
      break;
    case 'thinking.start':
      thinkingPart(answer, true);
      break;
    case 'thinking.delta':
      thinkingPart(answer, false).text += data.text || '';
      break;
    case 'thinking.end': {
      const part = lastPart(answer, 'thinking');
      if (part) part.done = true;
      break;
    }
    case 'tool.call': {
      const part = toolPart(answer, data.call_id, data.tool);
      if (data.args !== undefined) part.args = data.args;
      break;
    }
    case 'tool.input': { // the arguments as they stream in, or whole
      const part = toolPart(answer, data.call_id, data.tool);
      if (data.args !== undefined) part.args = data.args;
      else part.argsText += data.text ?? data.delta ?? '';
      break;
    }
    case 'tool.result': {
      const part = toolPart(answer, data.call_id, data.tool);
      Object.assign(part, { result: data.result_preview ?? data.result, ok: data.ok, error: data.error || null, durationMs: data.duration_ms ?? null });
      break;
    }
    case 'plan':
      answer.plan = Array.isArray(data.steps) ? data.steps.map((s) => (typeof s === 'string' ? s : JSON.stringify(s))) : answer.plan;
      break;
    case 'approval.request': {
      const isTool = data.tool !== undefined && data.tool !== null;
      answer.approval = { kind: isTool ? 'tool' : 'plan', message: data.message || '', tool: data.tool, args: data.args, nodeId: data.node_id || null };
      answer.decision = null;
      if (!isTool && !answer.plan) answer.plan = planSteps(answer.planText);
      break;
    }
    case 'approval.decision':
      answer.approval = null;
      answer.decision = { decision: data.decision, by: data.by, comment: data.comment };
      break;
    case 'heartbeat':
      answer.lastBeat = data.ts || true;
      break;
    case 'error':
      answer.errors.push({ code: data.code, message: data.message });
      break;
    case 'done':
      answer.status = data.status;
      answer.finished = true;
      answer.approval = null;
      answer.queued = null;
      if (data.error) answer.errors.push({ code: 'done', message: data.error });
      break;
    default:
      break;
  }
  return true;
}

/** Everything streamed as answer text so far (what Stop keeps). */
export function answerText(answer: Answer): string {
  return answer.parts.filter((p) => p.type === 'text').map((p) => p.text).join('');
}

