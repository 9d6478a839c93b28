// The console's browser scenarios. Each gets a fresh page (a fresh tab: its own sessionStorage),
// works only through the UI except for setup that is not under test, and saves screenshots.

import { writeFileSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { env, check, shot, login, apiClient, ensureScriptedChain, cuttableProxy, rand, example } from './lib.mjs';
import { newcomer } from './newcomer.mjs';
import { chain, parked } from './chain.mjs';
import { mcp } from './mcp.mjs';
import { keys } from './keys.mjs';
import { schedules } from './schedules.mjs';
import { chat, chat_queue, chat_stop, chat_reload } from './chat.mjs';
import { editor_build, editor_examples, editor_clipboard, editor_approval, editor_perf } from './editor.mjs';

const LONG = { timeout: 60000 };

/** The token box's text without the blinking cursor or placeholder. */
async function tokenText(page) {
  return page.$eval('[data-testid="tokens"]', (el) => [...el.childNodes].filter((n) => n.nodeType === 3).map((n) => n.textContent).join(''));
}

async function finalOutput(page) {
  const text = await page.textContent('[data-testid="final-output"]');
  try { return JSON.parse(text); } catch { return text; }
}

async function submitRun(page, { base = env.url, dsl, file, input }) {
  await page.goto(`${base}/console/runs/new`);
  if (file) {
    await page.getByRole('tab', { name: 'Upload file' }).click();
    await page.setInputFiles('input[aria-label="DSL file"]', file);
    await page.waitForSelector('[data-testid="preview"] [data-node-id]');
  } else {
    await page.fill('textarea[aria-label="Workflow DSL (JSON)"]', dsl);
    await page.waitForSelector('[data-testid="preview"] [data-node-id]');
  }
  await page.fill('textarea[name="text"], input[name="text"]', input);
  await page.click('[data-action="submit-run"]');
  await page.waitForURL(/\/console\/runs\/(?!new$)[^/]+$/);
  await page.waitForSelector('[data-testid="graph"] [data-node-id]');
  return decodeURIComponent(page.url().split('/').pop());
}

export const scenarios = {
  async login({ page }) {
    await page.goto(`${env.url}/console/runs`);
    await page.waitForURL(/\/console\/login\?next=%2Fruns/);
    await page.waitForSelector('form.login');
    await shot(page, '01-login');
    await page.getByLabel('Username').fill(env.user);
    await page.getByLabel('Password').fill('definitely-wrong');
    await page.getByRole('button', { name: 'Log in' }).click();
    const error = await page.waitForSelector('.error');
    const text = await error.textContent();
    check(/401/.test(text) && text.length > 20, `a wrong password should show the problem detail, got ${JSON.stringify(text)}`);
    await shot(page, '01b-login-error');
    await page.getByLabel('Password').fill(env.password);
    await page.getByRole('button', { name: 'Log in' }).click();
    await page.waitForURL(/\/console\/runs$/);
    const who = await page.textContent('[data-testid="whoami"]');
    check(who.includes(env.user) && who.includes('admin'), `whoami shows ${who}`);
    check(await page.evaluate(() => Boolean(sessionStorage.getItem('agentix.token'))), 'the token is kept in sessionStorage');
    await shot(page, '02-after-login');
    await page.getByRole('button', { name: 'Log out' }).click();
    await page.waitForURL(/\/console\/login/);
    check(await page.evaluate(() => sessionStorage.getItem('agentix.token') === null), 'logout forgets the token');
  },

  async models({ page }) {
    check(env.llmUrl, 'LLM_URL is not set');
    const name = `e2e-${rand()}`;
    const secret = `sk-e2e-secret-${rand()}`;
    await login(page);
    await page.goto(`${env.url}/console/models`);
    await page.waitForSelector('[data-testid="models"] table, [data-testid="models"] .empty');
    await page.locator('.page-head').getByRole('button', { name: 'Add model' }).click();
    const dlg = page.locator('dialog[open]');
    await dlg.getByLabel('Name (alias)').fill(name);
    await dlg.getByLabel('Provider').selectOption('openai');
    await dlg.getByLabel('Base URL').fill(env.llmUrl);
    await dlg.getByLabel('Model', { exact: true }).fill('e2e-model');
    await dlg.getByLabel('API key').fill(secret);
    await dlg.getByRole('button', { name: 'Add model' }).click();
    const row = page.locator(`[data-testid="models"] tr[data-model="${name}"]`);
    await row.waitFor();
    check((await row.textContent()).includes('stored'), 'the new model shows a stored API key');
    check(!(await page.content()).includes(secret), 'the API key must never be shown');
    // Write-only: editing shows an empty key field.
    await row.getByRole('button', { name: 'Edit' }).click();
    check(await page.locator('dialog[open] input[name="api_key"]').inputValue() === '', 'the edit form must not hold the key');
    await page.keyboard.press('Escape');
    await page.locator('dialog[open]').waitFor({ state: 'detached' });

    // Disable, then enable again (before it is in the chain, so no run is affected).
    await row.getByRole('button', { name: 'Disable' }).click();
    await page.waitForSelector(`[data-testid="models"] tr[data-model="${name}"] .badge-disabled:text("disabled")`);
    await row.getByRole('button', { name: 'Enable' }).click();
    await page.waitForSelector(`[data-testid="models"] tr[data-model="${name}"] .badge-enabled`);
    await row.getByRole('button', { name: `Move ${name} to the front of the chain` }).click();
    const first = page.locator('[data-testid="chain"] li').first();
    check(await first.getAttribute('data-name') === name, 'the model moved to the front of the draft chain');
    const [resp] = await Promise.all([
      page.waitForResponse((r) => r.url().endsWith('/api/v1/admin/models/chain') && r.request().method() === 'PUT'),
      page.click('[data-action="save-chain"]'),
    ]);
    check(resp.ok(), `PUT chain answered ${resp.status()}`);
    const { revision } = await resp.json();
    await page.waitForSelector(`[data-testid="apply"] [data-applied="true"][data-revision="${revision}"]`, { timeout: 30000 });
    check((await page.textContent('[data-testid="apply"]')).includes(`Revision ${revision} applied by every dispatcher`), 'the page says every dispatcher applied it');
    check(await page.locator(`[data-testid="models"] tr[data-model="${name}"]`).textContent().then((t) => t.includes('active')), 'the models table marks it active');
    await shot(page, '03-models-chain-applied');
  },

  async run({ page }) {
    await ensureScriptedChain(await apiClient());
    await login(page);
    const taskId = await submitRun(page, { dsl: example('hello.json'), input: 'How does the console show a run?' });
    await page.waitForSelector('[data-testid="graph"] [data-node-id="ans"][data-status="done"]', LONG);
    await page.waitForSelector('[data-testid="graph"] [data-node-id="out"][data-status="done"]', LONG);
    await page.waitForSelector('[data-testid="run-status"] .badge-done', LONG);
    await page.waitForSelector('[data-testid="final-output"]');
    const tokens = await tokenText(page);
    const output = await finalOutput(page);
    check(tokens.length > 20, `tokens are visible (${JSON.stringify(tokens)})`);
    check(output && output.out === tokens, `the streamed tokens equal the output:\n${tokens}\nvs\n${JSON.stringify(output)}`);
    check(await page.getAttribute('.run', 'data-duplicates') === '0', 'no event applied twice');
    // Keyboard: a graph node is focusable and Enter selects it.
    await page.focus('[data-testid="graph"] [data-node-id="out"]');
    await page.keyboard.press('Enter');
    await page.waitForSelector('[data-testid="node-panel"][data-node="out"]');
    await page.focus('[data-testid="graph"] [data-node-id="ans"]');
    await page.keyboard.press(' ');
    await page.waitForSelector('[data-testid="node-panel"][data-node="ans"]');
    await shot(page, '04-run-done');
    return { taskId };
  },

  async approve({ page }) {
    await ensureScriptedChain(await apiClient());
    await login(page);
    await submitRun(page, { file: join(env.examples, 'approval.json'), input: 'the console release' });
    await page.waitForSelector('[data-testid="approval"] button[data-action="approve"]', LONG);
    await page.waitForSelector('[data-testid="graph"] [data-node-id="review"][data-status="waiting"]');
    await page.waitForSelector('[data-testid="run-status"] .badge-waiting');
    await page.fill('#approval-comment', 'Looks good.');
    await shot(page, '05-approval-waiting');
    await page.click('[data-testid="approval"] button[data-action="approve"]');
    await page.waitForSelector('[data-testid="run-status"] .badge-done', LONG);
    await page.waitForSelector('[data-testid="graph"] [data-node-id="review"][data-status="done"]');
    await page.waitForSelector('[data-testid="graph"] [data-node-id="out"][data-status="done"]');
    await page.click('[data-testid="graph"] [data-node-id="review"]');
    await page.waitForSelector('[data-testid="node-panel"] >> text=approve');
    await shot(page, '06-approved-done');
  },

  async reload({ page }) {
    await ensureScriptedChain(await apiClient());
    await login(page);
    await submitRun(page, { dsl: example('hello.json'), input: 'Tell me about resuming streams.' });
    await page.waitForFunction(() => {
      const el = document.querySelector('[data-testid="tokens"]');
      return el && el.dataset.node === 'ans' && el.textContent.trim().length >= 24;
    }, null, LONG);
    check(await page.getAttribute('.run', 'data-finished') === 'false', 'the run finished before the reload: the scripted model is too fast for this test');
    const before = await tokenText(page);
    await shot(page, '07-before-reload');
    const resumed = [];
    page.on('request', (r) => { if (r.url().includes('/events')) resumed.push(r.url()); });
    await page.reload();
    await page.waitForSelector('[data-testid="run-status"] .badge-done', LONG);
    await page.waitForSelector('[data-testid="final-output"]');
    await page.click('[data-testid="graph"] [data-node-id="ans"]');
    const after = await tokenText(page);
    const output = await finalOutput(page);
    check(resumed.length > 0 && resumed.every((u) => /[?&]after=\d+/.test(u)), `the reloaded page resumes with ?after=<id>: ${resumed.join(', ')}`);
    check(after.startsWith(before), 'the text before the reload is kept');
    check(after.length > before.length, 'the text continued after the reload');
    check(output.out === after, `no gap and no duplicate: tokens\n${after}\nvs output\n${output.out}`);
    check(await page.getAttribute('.run', 'data-duplicates') === '0', 'the server sent nothing twice');
    check(await page.getAttribute('.run', 'data-gaps') === '0', 'no event is missing');
    await shot(page, '08-after-reload');
  },

  async offline({ page }) {
    await ensureScriptedChain(await apiClient());
    const proxy = await cuttableProxy();
    try {
      await login(page, { base: proxy.url });
      await submitRun(page, { base: proxy.url, dsl: example('hello.json'), input: 'What happens when the network drops?' });
      await page.waitForFunction(() => (document.querySelector('[data-testid="tokens"]')?.textContent || '').trim().length >= 16, null, LONG);
      const opened = [];
      page.on('request', (r) => { if (r.url().includes('/events')) opened.push(r.url()); });
      const before = await tokenText(page);
      proxy.cut();
      await page.waitForSelector('[data-testid="run-status"] .badge-done', LONG);
      await page.waitForSelector('[data-testid="final-output"]');
      await page.click('[data-testid="graph"] [data-node-id="ans"]');
      const text = await tokenText(page);
      const output = await finalOutput(page);
      check(opened.length > 0 && opened.every((u) => /[?&]after=\d+/.test(u)), `the stream reopened after the last id: ${opened}`);
      check(text.startsWith(before) && text.length > before.length, 'the text went on after the connection was cut');
      check(output.out === text, `no gap and no duplicate after the network came back:\n${text}\nvs\n${output.out}`);
      check(await page.getAttribute('.run', 'data-gaps') === '0', 'no event is missing');
      check(await page.getAttribute('.run', 'data-duplicates') === '0', 'nothing was sent twice');
      await shot(page, '08b-after-network-loss');
    } finally {
      await proxy.close();
    }
  },

  async kb({ page }) {
    const kb = `e2e ${rand()}`;
    const word = `zorblax${rand()}`;
    const dir = mkdtempSync(join(tmpdir(), 'agentix-kb-'));
    const file = join(dir, 'handbook.md');
    const paragraphs = Array.from({ length: 12 }, (_, i) => `## Section ${i + 1}\n\nThe ${word} procedure step ${i + 1}: operators check the heartbeat table, `
      + 'then the breaker states, then the tool registry counters before any change. '.repeat(6));
    writeFileSync(file, `# Operations handbook\n\n${paragraphs.join('\n\n')}\n`);
    await login(page);
    await page.goto(`${env.url}/console/kb`);
    await page.getByLabel('Name').fill(kb);
    await page.getByLabel('Description').fill('Created by the console browser test');
    await page.getByRole('button', { name: 'Create' }).click();
    await page.waitForURL(/\/console\/kb\/.+/);
    await page.setInputFiles('[data-testid="file-input"]', file);
    // Record every percentage the bar shows: it must only grow, and end at 100 %.
    await page.evaluate(() => {
      window.seenPercents = [];
      new MutationObserver(() => {
        const el = document.querySelector('[data-testid="upload-percent"]');
        if (el && window.seenPercents.at(-1) !== el.textContent) window.seenPercents.push(el.textContent);
      }).observe(document.querySelector('[data-testid="uploads"]'), { subtree: true, childList: true, characterData: true });
    });
    await page.getByRole('button', { name: 'Upload' }).click();
    await page.waitForSelector('[data-testid="uploads"] .progress-row');
    await page.waitForFunction(() => document.querySelector('[data-testid="upload-percent"]')?.textContent === '100 %', null, LONG);
    const seen = (await page.evaluate(() => window.seenPercents)).map((t) => parseInt(t, 10));
    check(seen.every((v, i) => i === 0 || v >= seen[i - 1]) && seen.at(-1) === 100, `progress only grows to 100 %: ${seen}`);
    check(await page.$eval('[data-testid="uploads"] progress', (p) => p.value) === 100, 'the bar is full');
    check((await page.textContent('[data-testid="uploads"]')).includes('chunks'), 'the upload says how many chunks');
    await page.waitForSelector('[data-testid="documents"] tr[data-doc]');
    await page.getByRole('searchbox').fill(`${word} heartbeat`);
    await page.getByRole('button', { name: 'Search' }).click();
    await page.waitForSelector('[data-testid="hits"] .hit', LONG);
    check(await page.locator('[data-testid="hits"] .hit .sources .badge').count() > 0, 'hits name their sources');
    await shot(page, '09-kb-upload-search');

    // Several files at once go in one batch request; each gets its own bar, the repeat of the
    // handbook is said to be a duplicate.
    const notes = ['alpha', 'beta'].map((n) => {
      const path = join(dir, `${n}.md`);
      writeFileSync(path, `# Notes ${n}\n\nThe ${word} ${n} checklist covers the breaker states.\n`);
      return path;
    });
    const batch = page.waitForResponse((r) => r.url().endsWith('/documents/batch') && r.request().method() === 'POST');
    await page.setInputFiles('[data-testid="file-input"]', [...notes, file]);
    await page.getByRole('button', { name: 'Upload' }).click();
    check((await batch).status() === 202, 'three files went in one batch request');
    for (const n of ['alpha.md', 'beta.md']) {
      await page.waitForFunction((name) => document.querySelector(`[data-upload="${name}"] [data-testid="upload-percent"]`)?.textContent === '100 %', n, LONG);
    }
    check((await page.textContent('[data-upload="handbook.md"]')).includes('already'), 'the repeated file is a duplicate');
    await page.waitForFunction(() => document.querySelectorAll('[data-testid="documents"] tr[data-doc]').length === 3, null, LONG);
  },

  async stale({ page }) {
    const instance = process.env.GHOST_INSTANCE;
    check(instance && process.env.GHOST_STOP_FILE, 'GHOST_INSTANCE and GHOST_STOP_FILE are not set');
    await login(page);
    await page.goto(`${env.url}/console/status`);
    const row = `[data-testid="instances"] tr[data-instance="${instance}"]`;
    await page.waitForSelector(`${row}:not(.stale)`, LONG);
    check((await page.textContent(row)).includes('healthy'), 'a beating instance is healthy');
    writeFileSync(process.env.GHOST_STOP_FILE, 'stop'); // its heartbeats stop now
    await page.waitForSelector(`${row}.stale`, LONG);
    check((await page.textContent(row)).includes('stale'), 'a silent instance is marked stale');
    await shot(page, '11b-status-stale');
  },

  async tour({ page, context }) {
    await login(page);
    await page.goto(`${env.url}/console/overview`);
    await page.waitForSelector('[data-testid="ov-total"]');
    await shot(page, '10-overview');

    await page.goto(`${env.url}/console/status`);
    await page.waitForSelector('[data-testid="instances"] tr[data-instance]');
    const services = await page.$$eval('[data-testid="instances"] tbody tr td:first-child', (tds) => tds.map((t) => t.textContent));
    for (const s of ['gateway', 'dispatcher', 'tools-go', 'tools-py']) check(services.includes(s), `status lists ${s} (got ${services})`);
    await page.waitForSelector('table caption:text("Tool registry")', { state: 'attached' });
    const queues = await page.$$eval('[data-testid="queues"] tr[data-queue]', (rows) => rows.map((r) => r.dataset.queue));
    check(queues.join() === 'tasks,ingest', `status lists the work queues (got ${queues})`);
    await shot(page, '11-status');

    const prompt = `e2e_prompt_${rand()}`;
    await page.goto(`${env.url}/console/prompts`);
    await page.locator('.page-head').getByRole('button', { name: 'New prompt' }).click();
    await page.getByLabel('Name').fill(prompt);
    await page.getByLabel('Text (version 1)').fill('You are a helpful assistant.\nAnswer briefly.\nCite sources.');
    await page.getByRole('button', { name: 'Create prompt' }).click();
    await page.waitForSelector(`#pr-title:has-text("${prompt}")`);
    await page.getByRole('row', { name: /v1/ }).getByRole('button', { name: 'Activate' }).click();
    await page.waitForSelector('#pr-title .badge-active');
    await page.locator('section:has(#pr-new) textarea').fill('You are a helpful assistant.\nAnswer in two sentences.\nCite sources.');
    await page.getByRole('button', { name: 'Save new version' }).click();
    await page.waitForSelector('.diff .add');
    check((await page.textContent('.diff .add')).includes('two sentences'), 'the diff shows the added line');
    await page.getByLabel('Canary percent', { exact: true }).fill('20');
    await page.getByRole('button', { name: 'Start canary' }).click();
    await page.waitForSelector('text=canary 20%');
    await shot(page, '12-prompts-diff-canary');

    // A workflow with errors: the problem+json detail and every error code are shown.
    await page.goto(`${env.url}/console/runs/new`);
    await page.fill('textarea[aria-label="Workflow DSL (JSON)"]', JSON.stringify({
      version: '1', nodes: [{ id: 'a', kind: 'wat', config: {} }, { id: 'b', kind: 'agent', config: {} }], edges: [{ source: 'a', target: 'zz' }],
    }));
    await page.getByRole('button', { name: 'Validate' }).click();
    const problem = await (await page.waitForSelector('.error:has(code)')).textContent();
    for (const code of ['422', 'unknown_kind', 'dangling_edge']) check(problem.includes(code), `the validation error names ${code}: ${problem}`);
    await shot(page, '12b-dsl-invalid');

    await page.goto(`${env.url}/console/audit`);
    await page.waitForSelector('table tbody tr');
    await page.getByLabel('Method').selectOption('POST');
    await page.getByLabel('Route or target').fill(prompt);
    const rows = await page.$$eval('table tbody tr', (trs) => trs.map((tr) => [...tr.cells].map((c) => c.textContent)));
    check(rows.length >= 3 && rows.every((r) => r[2] === 'POST' && r.join(' ').includes(prompt)),
      `the filters keep this tour's prompt changes only (${JSON.stringify(rows)})`);
    await shot(page, '13-audit');

    await page.goto(`${env.url}/console/guardrail`);
    await page.waitForSelector('main table, main .empty');
    await shot(page, '14-guardrail');

    await page.goto(`${env.url}/console/runs?status=done`);
    await page.waitForSelector('[data-testid="task-list"] tr[data-task], [data-testid="task-list"] .empty');
    const states = await page.$$eval('[data-testid="task-list"] tbody tr td:nth-child(2)', (tds) => tds.map((t) => t.textContent));
    check(states.every((s) => s === 'done'), `the state filter shows done runs only (${states})`);
    await shot(page, '15-runs');
    // Cursor paging: two per page, older then newer again.
    await page.goto(`${env.url}/console/runs?limit=2`);
    await page.waitForSelector('[data-testid="task-list"] tr[data-task]');
    const ids = () => page.$$eval('[data-testid="task-list"] tr[data-task]', (trs) => trs.map((tr) => tr.dataset.task));
    const first = await ids();
    await page.getByRole('button', { name: 'Older →' }).click();
    await page.waitForFunction((prev) => {
      const now = [...document.querySelectorAll('[data-testid="task-list"] tr[data-task]')].map((tr) => tr.dataset.task);
      return now.length && now[0] !== prev;
    }, first[0]);
    const second = await ids();
    check(first.length === 2 && second.every((id) => !first.includes(id) && id < first[1]), `the next page holds older runs (${first} then ${second})`);
    await page.getByRole('button', { name: '← Newer' }).click();
    await page.waitForFunction((want) => document.querySelector('[data-testid="task-list"] tr[data-task]')?.dataset.task === want, first[0]);

    // Narrow window: the same pages stay readable.
    const narrow = await context.newPage();
    await narrow.setViewportSize({ width: 390, height: 844 });
    await narrow.goto(`${env.url}/console/`);
    await narrow.waitForURL(/login/);
    await narrow.getByLabel('Username').fill(env.user);
    await narrow.getByLabel('Password').fill(env.password);
    await narrow.getByRole('button', { name: 'Log in' }).click();
    await narrow.waitForSelector('[data-testid="whoami"]');
    await narrow.goto(`${env.url}/console/status`);
    await narrow.waitForSelector('[data-testid="instances"] tr[data-instance]');
    const overflow = await narrow.evaluate(() => document.documentElement.scrollWidth - document.documentElement.clientWidth);
    check(overflow <= 1, `the narrow status page does not scroll sideways (${overflow}px)`);
    await shot(narrow, '16-status-narrow', { fullPage: false });
    const firstRun = await page.getAttribute('[data-testid="task-list"] tr[data-task]', 'data-task').catch(() => null);
    if (firstRun) {
      await narrow.goto(`${env.url}/console/runs/${encodeURIComponent(firstRun)}`);
      await narrow.waitForSelector('[data-testid="run-status"] .badge');
      await shot(narrow, '17-run-narrow', { fullPage: false });
    }
    await narrow.close();
  },

  newcomer, // in newcomer.mjs
  chain, // in chain.mjs
  parked, // in chain.mjs
  mcp, // in mcp.mjs
  keys, // in keys.mjs
  schedules, // in schedules.mjs
  chat, chat_queue, chat_stop, chat_reload, // in chat.mjs
  editor_build, editor_examples, editor_clipboard, editor_approval, editor_perf, // in editor.mjs
};
