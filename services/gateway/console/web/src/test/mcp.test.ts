// The MCP servers page's pure logic: header lines, tool name lists, the state shown for a
// server, and a body that never sends headers unless some were typed.

import { test } from 'vitest';
import assert from 'node:assert/strict';
import { parseHeaders, splitNames, serverState, serverBody } from '../pages/Mcp';

test('header lines parse to an object; a line without a name is refused', () => {
  assert.deepEqual(parseHeaders('Authorization: Bearer a:b\n\n  X-Team : ops \n'), { Authorization: 'Bearer a:b', 'X-Team': 'ops' });
  assert.throws(() => parseHeaders('Authorization Bearer x'), /line 1/);
  assert.throws(() => parseHeaders('ok: 1\n: no name'), /line 2/);
});

test('tool names split on commas and spaces, once each', () => {
  assert.deepEqual(splitNames(' add, shout  add\nlist '), ['add', 'shout', 'list']);
  assert.deepEqual(splitNames(''), []);
});

test('the state of a server comes from its bridges, or says why there is none', () => {
  const status: Record<string, any> = { calc: { name: 'calc', state: 'down', tools: 2 }, up: { name: 'up', state: 'connected', tools: 1 } };
  assert.equal(serverState({ name: 'calc', enabled: false }, status).state, 'disabled');
  assert.deepEqual(serverState({ name: 'calc', enabled: true }, status).kind, 'failed');
  assert.equal(serverState({ name: 'up', enabled: true }, status).kind, 'ok');
  assert.equal(serverState({ name: 'new', enabled: true }, status).state, 'connecting');
});

test('a body carries headers only when some were typed or cleared', () => {
  const stored = { name: 'calc', url: 'http://h/mcp', enabled: true, has_headers: true, id: 'mcp_1' };
  const toggled = serverBody(stored, { enabled: false });
  assert.equal('headers' in toggled, false);
  assert.equal(toggled.enabled, false);
  assert.deepEqual(Object.keys(toggled).sort(), ['allow_tools', 'deny_tools', 'enabled', 'high_risk_tools', 'name', 'url']);
  assert.deepEqual(serverBody(stored, { headers: {} }).headers, {});
});
