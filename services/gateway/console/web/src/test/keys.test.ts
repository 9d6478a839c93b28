// The Keys page's pure logic: a key's state (revoked, expired, active) and the body it posts.

import { test } from 'vitest';
import assert from 'node:assert/strict';
import { keyBody, keyState } from '../pages/Keys';

test('a key is revoked, expired or active', () => {
  const now = Date.parse('2026-12-05T12:00:00Z');
  assert.equal(keyState({ revoked_at: '2026-12-01T00:00:00Z', expires_at: null }, now), 'revoked');
  assert.equal(keyState({ revoked_at: null, expires_at: '2026-12-05T11:59:59Z' }, now), 'expired');
  assert.equal(keyState({ revoked_at: null, expires_at: '2027-03-01T00:00:00Z' }, now), 'active');
  assert.equal(keyState({ revoked_at: null, expires_at: null }, now), 'active');
});

test('the body carries the ticked scopes in order and an expiry only when one is chosen', () => {
  assert.deepEqual(keyBody(' ci ', '90d', { api: true, chat: true, admin: false }), { name: 'ci', scopes: ['chat', 'api'], expires_in: '90d' });
  assert.deepEqual(keyBody('forever', '', { mcp: true }), { name: 'forever', scopes: ['mcp'] });
});
