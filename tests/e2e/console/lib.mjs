// Helpers for the console's browser tests: the system chromium through playwright-core, login,
// screenshots, and a small API client for setup that the UI itself is not testing.

import { mkdirSync, readFileSync } from 'node:fs';
import net from 'node:net';
import { join } from 'node:path';
import { chromium } from 'playwright-core';

export const env = {
  url: (process.env.CONSOLE_URL || 'http://127.0.0.1:8080').replace(/\/$/, ''),
  user: process.env.CONSOLE_USER || 'admin',
  password: process.env.CONSOLE_PASSWORD || 'admin-password',
  shots: process.env.SCREENSHOT_DIR || 'artifacts/screenshots',
  llmUrl: process.env.LLM_URL || '',
  examples: process.env.EXAMPLES_DIR || new URL('../../../examples/', import.meta.url).pathname,
  chromium: process.env.CHROMIUM || '/usr/bin/chromium',
};

export const CHROMIUM_ARGS = [
  '--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
  '--disable-background-networking', '--disable-component-update', '--disable-sync',
];

/** One chromium for a whole run of scenarios: launching it is most of a short scenario's cost. */
export async function launchBrowser() {
  return chromium.launch({ executablePath: env.chromium, headless: true, args: CHROMIUM_ARGS });
}

/** A scenario's own context: cookies, storage and cache start empty, as in a fresh profile. */
export async function newContext(browser) {
  return browser.newContext({ viewport: { width: 1280, height: 800 }, locale: 'en-GB', timezoneId: 'UTC' });
}

/** An example workflow's JSON text from examples/. */
export function example(name) {
  return readFileSync(join(env.examples, name), 'utf8');
}

export class Failure extends Error {}

export function check(condition, message) {
  if (!condition) throw new Failure(message);
}

export async function shot(page, name, { fullPage = true } = {}) {
  mkdirSync(env.shots, { recursive: true });
  const path = join(env.shots, `${name}.png`);
  // A full-page shot of a scrolled page paints the sticky top bar mid-page: start at the top.
  // Toasts are transient; in a still picture they only hide what is under them. Hidden, not
  // removed: the page owns those elements.
  await page.evaluate(() => { window.scrollTo(0, 0); document.querySelector('.toasts')?.setAttribute('hidden', ''); });
  await page.screenshot({ path, fullPage });
  await page.evaluate(() => document.querySelector('.toasts')?.removeAttribute('hidden')).catch(() => {});
  return path;
}

/** Fail the scenario on any uncaught page error or console error from our own code. */
export function watchErrors(page) {
  const errors = [];
  page.on('pageerror', (err) => errors.push(`page error: ${err.message}`));
  page.on('console', (msg) => {
    if (msg.type() === 'error' && !/Failed to load resource/.test(msg.text())) errors.push(`console error: ${msg.text()}`);
  });
  return errors;
}

export async function login(page, { base = env.url, user = env.user, password = env.password } = {}) {
  await page.goto(`${base}/console/`);
  await page.waitForURL(/\/console\/login/);
  await page.getByLabel('Username').fill(user);
  await page.getByLabel('Password').fill(password);
  await page.getByRole('button', { name: 'Log in' }).click();
  await page.waitForSelector('[data-testid="whoami"]');
}

/** Setup over HTTP (not under test here): returns a fetch wrapper with a bearer token. */
export async function apiClient() {
  const resp = await fetch(`${env.url}/api/v1/auth/login`, {
    method: 'POST', headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ username: env.user, password: env.password }),
  });
  const body = await resp.text();
  check(resp.ok, `login over the API failed: ${resp.status} ${body}`);
  const { access_token: token } = JSON.parse(body);
  return async (path, { method = 'GET', body } = {}) => {
    const r = await fetch(`${env.url}/api/v1${path}`, {
      method,
      headers: { Authorization: `Bearer ${token}`, ...(body ? { 'Content-Type': 'application/json' } : {}) },
      body: body ? JSON.stringify(body) : undefined,
    });
    const text = await r.text();
    if (!r.ok) throw new Failure(`${method} ${path}: ${r.status} ${text}`);
    return text ? JSON.parse(text) : null;
  };
}

/**
 * Make the scripted OpenAI server (LLM_URL) the active model, so runs stream at a pace a test
 * can watch. Idempotent; returns the alias.
 */
export async function ensureScriptedChain(api, alias = 'e2e-llm') {
  check(env.llmUrl, 'LLM_URL is not set');
  const models = (await api('/admin/models?limit=200')).items;
  const chain = await api('/admin/models/chain');
  const active = models.find((m) => m.name === chain.active);
  if (active && active.base_url === env.llmUrl && active.enabled) return active.name;
  if (!models.find((m) => m.name === alias)) {
    await api('/admin/models', { method: 'POST', body: { name: alias, provider: 'openai', base_url: env.llmUrl, model: 'e2e-model', api_key: 'sk-e2e' } });
  }
  const out = await api('/admin/models/chain', { method: 'PUT', body: { active: alias, fallbacks: [] } });
  await waitChainApplied(api, out.revision);
  return alias;
}

/** The chain revision a dispatcher reports in its heartbeat (same reading as the console). */
export function chainRevisionOf(detail) {
  const d = detail || {};
  const v = d.chain_revision ?? d.chain?.revision ?? d.models?.chain_revision ?? d.models?.revision;
  return typeof v === 'number' ? v : null;
}

/** Wait until every live dispatcher runs chain revision >= `revision`. */
export async function waitChainApplied(api, revision, timeoutMs = 20000) {
  const deadline = Date.now() + timeoutMs;
  let seen = [];
  while (Date.now() < deadline) {
    const st = await api('/admin/status');
    seen = (st.instances || []).filter((i) => i.service === 'dispatcher').map((i) => chainRevisionOf(i.detail));
    if (seen.length && seen.every((r) => r !== null && r >= revision)) return;
    await new Promise((r) => setTimeout(r, 250));
  }
  throw new Failure(`dispatchers did not apply chain revision ${revision} (they report ${JSON.stringify(seen)})`);
}

export const rand = () => Math.random().toString(36).slice(2, 8);

/**
 * A TCP proxy in front of the gateway whose connections the test can cut, as a network
 * failure would (Chromium's offline emulation leaves open streams alone).
 */
export async function cuttableProxy(target = env.url) {
  const { hostname, port } = new URL(target);
  const sockets = new Set();
  const server = net.createServer((client) => {
    const upstream = net.connect(Number(port), hostname);
    for (const s of [client, upstream]) { sockets.add(s); s.on('close', () => sockets.delete(s)); s.on('error', () => {}); }
    client.pipe(upstream).pipe(client);
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${server.address().port}`,
    cut() { for (const s of sockets) s.destroy(); return sockets.size; },
    close() { this.cut(); return new Promise((resolve) => server.close(resolve)); },
  };
}

/** The answers the scripted model server (LLM_URL) gives next, in place of any left from an
 * earlier scenario (its control endpoint, beside /v1); `then` answers once they are used up. */
export async function script(steps, then = undefined) {
  const root = env.llmUrl.replace(/\/+$/, '').replace(/\/v1$/, '');
  const resp = await fetch(`${root}/_script`, {
    method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ steps, append: false, ...(then ? { then } : {}) }),
  });
  check(resp.ok, `scripting the model server: ${resp.status}`);
}

/** Let a reply scripted with `gate` go on streaming. */
export async function release(gate) {
  const root = env.llmUrl.replace(/\/+$/, '').replace(/\/v1$/, '');
  const resp = await fetch(`${root}/_release`, {
    method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ gate }),
  });
  check(resp.ok, `releasing the model server's gate: ${resp.status}`);
}

export const reply = (text, extra = {}) => ({
  kind: 'reply', text, tool_calls: [], reasoning: null, reasoning_field: 'reasoning_content', usage: true, chunk_chars: 4, delay_s: 0, finish_reason: null, ...extra,
});
