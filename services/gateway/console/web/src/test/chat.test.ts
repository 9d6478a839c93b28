// The chat page's live answer folded from a run's events: at most once per event id, thinking
// in both spellings, tool steps, the plan and the two kinds of approval.

import { test } from 'vitest';
import assert from 'node:assert/strict';
import { initialAnswer, applyRunEvent, answerText, planSteps } from '../lib/chatstate';

function fold(events: any[], answer = initialAnswer('t_1')) {
  for (const e of events) applyRunEvent(answer, e);
  return answer;
}

const ev = (id: number | null, event: string, data: any = {}) => ({ id: id === null ? null : String(id), event, data });

test('a replayed stream never doubles a token, and a queued run says how many are ahead', () => {
  const events = [ev(1, 'queued', { position: 2 }), ev(2, 'status', { status: 'running' }),
    ev(3, 'token', { node_id: 'ans', text: 'Hel' }), ev(4, 'token', { node_id: 'ans', text: 'lo' })];
  const once = fold(events.slice(0, 1));
  assert.equal(once.queued, 2);
  const answer = fold(events, once); // the first event again: dropped
  assert.equal(answer.duplicates, 1);
  assert.equal(answer.queued, null);
  fold(events, answer);
  assert.equal(answerText(answer), 'Hello');
  assert.equal(answer.duplicates, 5);
});

test('thinking folds from the old `thinking` event and from thinking.start/delta/end alike', () => {
  const old = fold([ev(1, 'thinking', { text: 'hm' }), ev(2, 'thinking', { text: 'm' }), ev(3, 'token', { text: 'Yes' })]);
  const fresh = fold([ev(1, 'thinking.start'), ev(2, 'thinking.delta', { text: 'hm' }), ev(3, 'thinking.delta', { text: 'm' }),
    ev(4, 'thinking.end'), ev(5, 'token', { text: 'Yes' })]);
  for (const answer of [old, fresh]) {
    assert.deepEqual(answer.parts.map((p) => [p.type, p.text, p.done]), [['thinking', 'hmm', true], ['text', 'Yes', undefined]]);
  }
});

test('tool steps keep their order between texts, with input streamed or whole, and their result', () => {
  const answer = fold([
    ev(1, 'token', { text: 'Let me look. ' }),
    ev(2, 'tool.call', { call_id: 'c1', tool: 'kb_search' }),
    ev(3, 'tool.input', { call_id: 'c1', text: '{"q":' }), ev(4, 'tool.input', { call_id: 'c1', text: '"x"}' }),
    ev(5, 'tool.result', { call_id: 'c1', ok: true, duration_ms: 12, result_preview: '3 hits' }),
    ev(6, 'token', { text: 'Found it.' }),
  ]);
  assert.deepEqual(answer.parts.map((p) => p.type), ['text', 'tool', 'text']);
  assert.deepEqual([answer.parts[1].argsText, answer.parts[1].result, answer.parts[1].ok], ['{"q":"x"}', '3 hits', true]);
  assert.equal(answerText(answer), 'Let me look. Found it.');
});

test('a plan comes from the `plan` event or from the plan agent\'s JSON, and approval kinds differ', () => {
  const fromTokens = fold([ev(1, 'token', { node_id: 'plan', text: '{"steps": ["search",' }), ev(2, 'token', { node_id: 'plan', text: ' "answer"]}' }),
    ev(3, 'approval.request', { node_id: 'approve', message: 'Approve this plan?' })]);
  assert.deepEqual(fromTokens.plan, ['search', 'answer']);
  assert.equal(fromTokens.approval.kind, 'plan');
  assert.equal(answerText(fromTokens), ''); // the plan's JSON is not the answer
  const fromEvent = fold([ev(1, 'plan', { steps: ['one', { do: 'two' }] })]);
  assert.deepEqual(fromEvent.plan, ['one', '{"do":"two"}']);
  const tool = fold([ev(1, 'approval.request', { tool: 'code_exec', args: { code: '1+1' }, message: 'Run it?' })]);
  assert.deepEqual([tool.approval.kind, tool.approval.tool, tool.approval.args], ['tool', 'code_exec', { code: '1+1' }]);
  fold([ev(2, 'approval.decision', { decision: 'approve', by: 'dev' })], tool);
  assert.equal(tool.approval, null);
  assert.equal(tool.decision.decision, 'approve');
  assert.equal(planSteps('{"steps": ['), null);
});

test('heartbeats only mark the run alive; errors and the end are kept', () => {
  const answer = fold([ev(null, 'heartbeat', { ts: 'now' }), ev(1, 'error', { code: 'timeout', message: 'The model timed out.' }),
    ev(2, 'done', { status: 'failed', error: 'boom' })]);
  assert.equal(answer.lastBeat, 'now');
  assert.deepEqual(answer.errors.map((e) => e.message), ['The model timed out.', 'boom']);
  assert.equal(answer.finished, true);
  assert.equal(answer.parts.length, 0);
});
