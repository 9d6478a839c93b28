// Scenarios `chain` and `parked`: an admin clears the failover chain and chains the built-in
// offline model on the models page (the API agrees afterwards); then a run of approval.json on
// that model shows what its agent node spent while it waits for the decision, and after it.

import { env, check, shot, login, apiClient, ensureScriptedChain, waitChainApplied, example } from './lib.mjs';

const LONG = { timeout: 60000 };

/** Click `selector` and return the answer of the chain PUT it sends. */
async function putChainBy(page, selector) {
  const [resp] = await Promise.all([
    page.waitForResponse((r) => r.url().endsWith('/api/v1/admin/models/chain') && r.request().method() === 'PUT'),
    page.click(selector),
  ]);
  check(resp.ok(), `PUT chain answered ${resp.status()}: ${await resp.text()}`);
  return { sent: resp.request().postDataJSON(), answer: await resp.json() };
}

async function appliedEverywhere(page, revision) {
  await page.waitForSelector(`[data-testid="apply"] [data-applied="true"][data-revision="${revision}"]`, { timeout: 30000 });
}

export async function chain({ page }) {
  const api = await apiClient();
  const scripted = await ensureScriptedChain(api); // setup: a chain to clear
  await login(page);
  await page.goto(`${env.url}/console/models`);
  await page.waitForSelector(`[data-testid="chain"] li[data-name="${scripted}"]`);

  // 1. Clearing asks first; Cancel leaves the chain alone.
  await page.click('[data-action="clear-chain"]');
  const dlg = page.locator('dialog[open]');
  check((await dlg.textContent()).includes('built-in model'), 'the confirmation says what answers instead');
  await dlg.getByRole('button', { name: 'Cancel' }).click();
  await dlg.waitFor({ state: 'detached' });
  check((await api('/admin/models/chain')).active === scripted, 'Cancel keeps the chain');

  await page.click('[data-action="clear-chain"]');
  await shot(page, '21-chain-clear-confirm', { fullPage: false });
  const cleared = await putChainBy(page, 'dialog[open] [data-action="confirm-clear"]');
  check(JSON.stringify(cleared.sent) === JSON.stringify({ active: null, fallbacks: [] }), `the clear sends ${JSON.stringify(cleared.sent)}`);
  await dlg.waitFor({ state: 'detached' });
  await appliedEverywhere(page, cleared.answer.revision);
  const afterClear = await api('/admin/models/chain');
  check(afterClear.active === null && afterClear.fallbacks.length === 0 && afterClear.revision === cleared.answer.revision,
    `the API shows the chain cleared: ${JSON.stringify(afterClear)}`);
  check((await page.textContent('[data-testid="chain"] .empty')).includes('No chain set'), 'the page says no chain is set');
  check(await page.isDisabled('[data-action="clear-chain"]'), 'nothing left to clear');
  check(!(await page.textContent(`[data-testid="models"] tr[data-model="${scripted}"]`)).includes('active'), 'the table no longer marks a model active');
  await shot(page, '22-chain-cleared');

  // 2. The built-in offline model is a choice of its own, and can be the active model.
  await page.getByLabel('Add a model to the chain').selectOption({ label: 'offline (built-in)' });
  const first = page.locator('[data-testid="chain"] li').first();
  check(await first.getAttribute('data-name') === 'offline', 'offline is first in the draft');
  const label = await first.textContent();
  check(label.includes('built-in') && !label.includes('unknown model'), `offline is shown as the built-in model: ${label}`);
  const saved = await putChainBy(page, '[data-action="save-chain"]');
  check(JSON.stringify(saved.sent) === JSON.stringify({ active: 'offline', fallbacks: [] }), `the save sends ${JSON.stringify(saved.sent)}`);
  await appliedEverywhere(page, saved.answer.revision);
  const afterSave = await api('/admin/models/chain');
  check(afterSave.active === 'offline' && afterSave.fallbacks.length === 0 && afterSave.revision === saved.answer.revision,
    `the API shows offline active: ${JSON.stringify(afterSave)}`);
  check(!(await page.isDisabled('[data-action="clear-chain"]')), 'a set chain can be cleared again');
  await shot(page, '23-chain-offline');
}

/** The numbers of the run header's usage line ("14 prompt + 28 completion tokens · …"). */
async function shownUsage(page) {
  const text = await page.textContent('[data-testid="usage"]');
  const m = /([\d,]+) prompt \+ ([\d,]+) completion tokens/.exec(text);
  check(m, `the run shows its usage: ${text}`);
  return [Number(m[1].replace(/,/g, '')), Number(m[2].replace(/,/g, ''))];
}

async function usageShows(page, api, taskId, status) {
  const task = await api(`/tasks/${encodeURIComponent(taskId)}`);
  check(task.status === status, `the task is ${task.status}, not ${status}`);
  const want = [task.usage.prompt_tokens, task.usage.completion_tokens];
  check(want[0] > 0 && want[1] > 0 && JSON.stringify(task.usage.models) === '["offline"]',
    `the API reports the agent node's usage while ${status}: ${JSON.stringify(task.usage)}`);
  await page.waitForFunction(([p, c]) => {
    const text = document.querySelector('[data-testid="usage"]')?.textContent || '';
    return text.startsWith(`${p} prompt + ${c} completion tokens`);
  }, want, { timeout: 10000 }).catch(async () => {
    throw new Error(`while ${status} the page shows ${JSON.stringify(await shownUsage(page))}, the API ${JSON.stringify(want)}`);
  });
  return want;
}

export async function parked({ page }) {
  const api = await apiClient();
  const current = await api('/admin/models/chain');
  if (current.active !== 'offline') {
    const out = await api('/admin/models/chain', { method: 'PUT', body: { active: 'offline', fallbacks: [] } });
    await waitChainApplied(api, out.revision);
  }
  await login(page);
  await page.goto(`${env.url}/console/runs/new`);
  await page.fill('textarea[aria-label="Workflow DSL (JSON)"]', example('approval.json'));
  await page.waitForSelector('[data-testid="preview"] [data-node-id]');
  await page.fill('textarea[name="text"], input[name="text"]', 'the offline model');
  await page.click('[data-action="submit-run"]');
  await page.waitForURL(/\/console\/runs\/(?!new$)[^/]+$/);
  const taskId = decodeURIComponent(page.url().split('/').pop());
  await page.waitForSelector('[data-testid="approval"] button[data-action="approve"]', LONG);
  await page.waitForSelector('[data-testid="run-status"] .badge-waiting');
  const waiting = await usageShows(page, api, taskId, 'waiting');
  await shot(page, '24-parked-usage');
  await page.click('[data-testid="approval"] button[data-action="approve"]');
  await page.waitForSelector('[data-testid="run-status"] .badge-done', LONG);
  const done = await usageShows(page, api, taskId, 'done');
  check(JSON.stringify(done) === JSON.stringify(waiting), `the approval kept the usage: ${waiting} then ${done}`);
}
