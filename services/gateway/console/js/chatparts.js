// How a chat thread looks: stored messages (the truth) and a run's live answer (a preview folded
// by chatstate.js), as DOM. Text only, never markup from the server or the model.

import { h, badge, fmtJson, fmtMs } from './ui.js';

function toolStep({ name, input, result, error, ok, durationMs, running, key = null }) {
  const mark = running ? badge('running', 'running') : badge(ok === false ? 'error' : 'ok', ok === false ? 'error' : 'ok');
  return h('details', { class: 'chat-tool', 'data-testid': 'tool-step', 'data-key': key },
    h('summary', {}, 'Tool ', h('code', {}, name || '?'), ' ', mark, durationMs !== null && durationMs !== undefined ? h('span', { class: 'muted small' }, ` ${fmtMs(durationMs)}`) : null),
    h('div', { class: 'small muted' }, 'input'), h('pre', {}, fmtJson(input ?? {})),
    ok === false ? [h('div', { class: 'small muted' }, 'error'), h('pre', {}, fmtJson(error ?? ''))]
      : result !== undefined && result !== null ? [h('div', { class: 'small muted' }, 'result'), h('pre', {}, fmtJson(result))] : null);
}

// Failover notices during a run: the run goes on with another model, nothing failed yet.
const NOTICE_CODES = new Set(['breaker_open', 'model_skipped']);

function thinking(text, open = false, key = null) {
  return h('details', { class: 'chat-thinking', 'data-testid': 'thinking', 'data-key': key, open }, h('summary', {}, 'Thinking'), h('pre', {}, text));
}

/** A stored message: the user's, the assistant's answer (with its tool steps and thinking), an
 * error sentence, or an answer cut short (`interrupted`). */
export function messageView(m) {
  const kind = m.message_type === 'error' ? 'error' : m.role;
  return h('article', {
    class: `chat-msg chat-${kind}${m.message_type === 'interrupted' ? ' chat-interrupted' : ''}`,
    'data-testid': 'message', 'data-role': m.role, 'data-type': m.message_type, 'data-run': m.run_id || '',
  },
  m.message_type === 'interrupted' ? h('div', { class: 'chat-mark' }, badge('interrupted', 'cancelled'), ' the answer stopped here') : null,
  m.thinking ? thinking(m.thinking) : null,
  (m.tool_events || []).map((t) => toolStep({ name: t.name, input: t.input, result: t.result, error: t.error, ok: t.ok, durationMs: t.duration_ms })),
  h('div', { class: 'chat-text', 'data-testid': 'message-text' }, m.content || ''),
  m.role === 'assistant' && (m.model || m.usage) ? h('div', { class: 'muted small' },
    m.model || '', m.usage && m.usage.completion_tokens ? ` · ${m.usage.completion_tokens} tokens` : '') : null);
}

/**
 * A run's live answer. `actions.decide(decision)` answers an approval; `quiet` says the stream is
 * alive but nothing came for a while.
 */
export function liveView(answer, { decide, quiet }) {
  const waiting = answer.queued !== null && !answer.finished;
  return h('article', { class: 'chat-msg chat-assistant chat-live', 'data-testid': 'live-answer', 'data-run': answer.runId, 'aria-busy': String(!answer.finished) },
    waiting ? h('div', { class: 'notice', 'data-testid': 'queued' }, `Queued — ${answer.queued} ${answer.queued === 1 ? 'run' : 'runs'} ahead of this one.`) : null,
    answer.plan ? planView(answer, decide) : null,
    answer.parts.map((p, i) => {
      if (p.type === 'thinking') return thinking(p.text, !p.done, `thinking-${i}`);
      if (p.type === 'tool') {
        return toolStep({
          name: p.tool, input: p.args ?? (p.argsText || undefined), result: p.result, error: p.error, ok: p.ok, durationMs: p.durationMs, running: p.ok === undefined, key: `tool-${p.callId}`,
        });
      }
      return h('div', { class: 'chat-text', 'data-testid': 'live-text' }, p.text);
    }),
    answer.approval && answer.approval.kind === 'tool' ? toolApproval(answer.approval, decide) : null,
    answer.approval && answer.approval.kind === 'plan' && !answer.plan ? h('div', { class: 'approval-box' }, h('pre', {}, answer.approval.message),
      decisionButtons(decide)) : null,
    answer.errors.map((e) => (NOTICE_CODES.has(e.code) ? h('div', { class: 'notice warn small' }, e.message || e.code)
      : h('div', { class: 'error', role: 'alert', 'data-testid': 'live-error' }, e.message || e.code))),
    !answer.finished && !waiting && !answer.approval ? h('div', { class: 'muted small chat-typing' },
      quiet ? 'The model is quiet — still working…' : h('span', { class: 'cursor', 'aria-hidden': 'true' }, ' ')) : null);
}

function planView(answer, decide) {
  return h('section', { class: 'chat-plan', 'data-testid': 'plan' },
    h('h3', {}, 'Plan'),
    h('ol', {}, answer.plan.map((step) => h('li', {}, step))),
    answer.approval && answer.approval.kind === 'plan' ? decisionButtons(decide) : null,
    answer.decision ? h('p', { class: 'small' }, badge(answer.decision.decision, answer.decision.decision === 'approve' ? 'ok' : 'error'), answer.decision.by ? ` by ${answer.decision.by}` : '') : null);
}

function toolApproval(approval, decide) {
  return h('section', { class: 'approval-box', 'data-testid': 'tool-approval' },
    h('h3', {}, 'Run the tool ', h('code', {}, approval.tool), '?'),
    approval.message ? h('p', {}, approval.message) : null,
    h('pre', {}, fmtJson(approval.args ?? {})),
    decisionButtons(decide));
}

function decisionButtons(decide) {
  const approve = h('button', { type: 'button', class: 'ok solid', 'data-action': 'approve' }, 'Approve');
  const reject = h('button', { type: 'button', class: 'danger solid', 'data-action': 'reject' }, 'Reject');
  if (decide) {
    approve.addEventListener('click', () => decide('approve', approve));
    reject.addEventListener('click', () => decide('reject', reject));
  }
  return h('div', { class: 'actions' }, approve, reject);
}
