// The console's pure logic: SSE parsing across chunk boundaries, the run state's at-most-once
// folding, the layout, the prompt diff, problem sentences and the chain editor's choices.

import { test } from 'vitest';
import assert from 'node:assert/strict';
import { SseParser } from '../lib/sse';
import { initialState, applyEvent } from '../lib/runstate';
import { diffLines } from '../lib/diff';
import { problemItemText } from '../lib/format';
import { chainChoices } from '../pages/Models';
import { layoutGraph, NODE_H, NODE_W } from '../graph/layout';

const STREAM = ': ping\r\n\r\nid: 7\r\nevent: token\r\ndata: {"node_id":"a","text":"Hel"}\r\n\r\n'
  + 'id: 9\nevent: token\ndata: {"node_id":"a",\ndata: "text":"lo"}\n\n'
  + 'retry: 1500\nid: 12\nevent: done\ndata: {"status":"done"}\n\n';

test('the SSE parser gives the same messages however the bytes are split', () => {
  const whole: any[] = [];
  new SseParser((m) => whole.push(m)).push(STREAM);
  assert.deepEqual(whole.map((m) => [m.id, m.event]), [['7', 'token'], ['9', 'token'], ['12', 'done']]);
  assert.equal(whole[1].data, '{"node_id":"a",\n"text":"lo"}');
  for (let size = 1; size < 9; size += 1) {
    const got: any[] = [];
    const parser = new SseParser((m) => got.push(m));
    for (let i = 0; i < STREAM.length; i += size) parser.push(STREAM.slice(i, i + size));
    assert.deepEqual(got, whole, `chunks of ${size}`);
    assert.equal(parser.retry, 1500);
  }
});

test('a replayed event is applied once, and a gap in n is counted', () => {
  const state = initialState('t_1');
  const ev = (id: number, n: number, event: string, data: any) => ({ id: String(id), event, data: { n, task_id: 't_1', ...data } });
  assert.equal(applyEvent(state, ev(3, 0, 'node.start', { node_id: 'a', kind: 'agent' })), true);
  applyEvent(state, ev(4, 1, 'token', { node_id: 'a', text: 'Hel' }));
  assert.equal(applyEvent(state, ev(4, 1, 'token', { node_id: 'a', text: 'Hel' })), false);
  applyEvent(state, ev(8, 2, 'token', { node_id: 'a', text: 'lo' }));
  applyEvent(state, ev(9, 4, 'node.end', { node_id: 'a', status: 'done', duration_ms: 5 }));
  assert.equal(state.nodes.a.text, 'Hello');
  assert.equal(state.nodes.a.status, 'done');
  assert.equal(state.duplicates, 1);
  assert.equal(state.gaps, 1);
  assert.equal(state.lastId, '9');
  // A state restored from storage resumes after its last id: older ids are ignored.
  const restored = JSON.parse(JSON.stringify(state));
  assert.equal(applyEvent(restored, ev(8, 2, 'token', { node_id: 'a', text: 'lo' })), false);
  assert.equal(restored.nodes.a.text, 'Hello');
});

test('approval, tool calls and done fold into the state', () => {
  const s = initialState('t_2');
  let id = 0;
  const put = (event: string, data: any) => applyEvent(s, { id: String(++id), event, data: { task_id: 't_2', ...data } });
  put('tool.call', { node_id: 'a', call_id: 'c1', tool: 'kb_search', args: { query: 'x' } });
  put('tool.result', { node_id: 'a', call_id: 'c1', ok: true, duration_ms: 3, result_preview: '{"chunks": []}' });
  put('approval.request', { node_id: 'r', message: 'ok?' });
  put('status', { status: 'waiting' });
  assert.equal(s.waitingNode, 'r');
  assert.equal(s.nodes.r.status, 'waiting');
  put('approval.decision', { node_id: 'r', decision: 'approve', by: 'alice' });
  put('status', { status: 'running' });
  assert.equal(s.waitingNode, null);
  put('done', { status: 'done', output: { out: 1 } });
  assert.deepEqual(s.nodes.a.tools[0], { call_id: 'c1', tool: 'kb_search', args: { query: 'x' }, result: '{"chunks": []}', ok: true, error: undefined, duration_ms: 3 });
  assert.equal(s.finished, true);
  assert.deepEqual(s.output, { out: 1 });
});

test('a parked task shows the usage its waiting status carries, then the total of done', () => {
  const s = initialState('t_3');
  let id = 0;
  const put = (event: string, data: any) => applyEvent(s, { id: String(++id), event, data: { task_id: 't_3', ...data } });
  const spent = { prompt_tokens: 14, completion_tokens: 28, cost: 0, models: ['offline'] };
  put('node.end', { node_id: 'draft', status: 'done', duration_ms: 4, usage: spent });
  put('approval.request', { node_id: 'review', message: 'Publish?' });
  put('status', { status: 'waiting', usage: spent });
  assert.deepEqual(s.usage, spent);
  put('status', { status: 'running' }); // the resumed run's status carries none: keep what we have
  assert.deepEqual(s.usage, spent);
  put('done', { status: 'done', output: { out: 'x' }, usage: { ...spent, completion_tokens: 30 } });
  assert.equal(s.usage.completion_tokens, 30);
});

test('the chain editor offers the built-in offline model besides the stored ones', () => {
  const stored = [{ name: 'gpt' }, { name: 'local' }];
  assert.deepEqual(chainChoices(stored, []), [['gpt', 'gpt'], ['local', 'local'], ['offline', 'offline (built-in)']]);
  assert.deepEqual(chainChoices(stored, ['local', 'offline']), [['gpt', 'gpt']]);
  // A stored model named `offline` is listed once, as what it is.
  assert.deepEqual(chainChoices([{ name: 'offline' }], []), [['offline', 'offline']]);
});

test('the layout puts every edge left to right and no two nodes on top of each other', () => {
  const nodes = ['in', 'route', 'facts', 'risks', 'note', 'merge', 'out', 'out_note'].map((id) => ({ id }));
  const edges = [['in', 'route'], ['route', 'facts'], ['route', 'risks'], ['route', 'note'], ['facts', 'merge'],
    ['risks', 'merge'], ['merge', 'out'], ['note', 'out_note'], ['in', 'out']].map(([source, target]) => ({ source, target }));
  const placed = layoutGraph(nodes, edges);
  for (const e of edges) assert.ok(placed.get(e.source)!.x + NODE_W < placed.get(e.target)!.x, `${e.source}→${e.target}`);
  const all = [...placed.entries()];
  for (let i = 0; i < all.length; i += 1) {
    for (let j = i + 1; j < all.length; j += 1) {
      const [[a, p], [b, q]] = [all[i], all[j]];
      const apart = p.x + NODE_W <= q.x || q.x + NODE_W <= p.x || p.y + NODE_H <= q.y || q.y + NODE_H <= p.y;
      assert.ok(apart, `${a} and ${b} overlap`);
    }
  }
});

test('the line diff keeps common lines and marks the changed ones', () => {
  const d = diffLines('a\nb\nc\nd', 'a\nx\nc\nd\ne');
  assert.deepEqual(d.map((l) => `${l.op}${l.text}`), [' a', '-b', '+x', ' c', ' d', '+e']);
  assert.deepEqual(diffLines('same', 'same').map((l) => l.op), [' ']);
});

test('a problem item says where once, then what', () => {
  const say = problemItemText;
  assert.equal(say({ node_id: 'b', field: 'config.prompt', message: "node 'b': config.prompt: required" }), "node 'b': config.prompt: required");
  assert.equal(say({ node_id: 'a', field: 'nodes[0].kind', message: "node 'a': kind 'wat' is unknown" }), "node 'a': kind 'wat' is unknown");
  assert.equal(say({ edge_index: 0, field: 'target', message: "edges[0]: target 'zz' is not a node" }), "edges[0]: target 'zz' is not a node");
  assert.equal(say({ field: 'dsl', message: 'Field required' }), 'dsl: Field required');
  assert.equal(say({ field: 'a', message: 'Input should be a valid integer' }), 'a: Input should be a valid integer');
  assert.equal(say({ node_id: 'x', message: 'unreachable' }), 'node x: unreachable');
  assert.equal(say({ position: 25, message: 'JSON decode error' }), 'at character 25: JSON decode error');
  assert.equal(say({ position: 25, message: 'JSON decode error at character 25: Expecting value' }), 'JSON decode error at character 25: Expecting value');
});
