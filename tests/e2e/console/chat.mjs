// Scenarios of the Chat page. The scripted model server (LLM_URL) is the active model; each
// scenario queues the answers it needs on it (POST /_script) before it sends a message:
// - `chat`: a streamed answer is replaced by the stored one; thinking and a tool step fold away;
//   pin, rename and delete in the conversation list;
// - `chat_queue`: a plan-mode message parks at its plan; a second message queues behind it (the
//   indicator); a reload finds both again; approving the plan answers both in turn;
// - `chat_stop`: Stop mid-answer keeps the partial answer, marked interrupted; a failure shows as
//   an error message; the model picker's choice answers the next message;
// - `chat_reload`: a reload mid-answer re-attaches to the running run and finishes that answer.

import { env, check, shot, login, apiClient, ensureScriptedChain, rand, script, release, reply } from './lib.mjs';

const LONG = { timeout: 60000 };
const PARTIAL = 'The first half of an answer that never ';
const LONG_ANSWER = Array.from({ length: 12 }, (_, i) => `Sentence ${i + 1} of a slow answer that a reload interrupts.`).join(' ');

const hang = (text) => ({ kind: 'hang', text, seconds: 600, chunk_chars: 4 });

async function openChat(page) {
  await login(page);
  await page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'Chat' }).click();
  await page.waitForURL(/\/console\/chat$/);
  await page.waitForSelector('[data-testid="conversations"]');
}

/** Keep every live text the page shows (a MutationObserver), since it is replaced at the end. */
async function recordLiveText(page) {
  await page.evaluate(() => {
    window.liveSeen = [];
    new MutationObserver(() => {
      const text = [...document.querySelectorAll('[data-testid="live-text"]')].map((el) => el.textContent).join('');
      if (text && text !== window.liveSeen[window.liveSeen.length - 1]) window.liveSeen.push(text);
    }).observe(document.querySelector('[data-testid="thread"]'), { subtree: true, childList: true, characterData: true });
  });
}

async function send(page, text) {
  await page.getByLabel('Message', { exact: true }).fill(text);
  await page.getByLabel('Message', { exact: true }).press('Enter'); // Enter sends
  await page.waitForFunction((t) => [...document.querySelectorAll('[data-testid="message"][data-role="user"]')].some((m) => m.textContent.includes(t)), text);
}

/** The stored messages of the thread as [role, type, text]. */
async function thread(page) {
  return page.$$eval('[data-testid="message"]', (els) => els.map((m) => [m.dataset.role, m.dataset.type, m.querySelector('[data-testid="message-text"]').textContent]));
}

async function answered(page, count) {
  await page.waitForFunction((n) => document.querySelectorAll('[data-testid="message"][data-role="assistant"]').length >= n
    && !document.querySelector('[data-testid="live-answer"]'), count, LONG);
}

export async function chat({ page }) {
  await ensureScriptedChain(await apiClient());
  await openChat(page);
  // Shift+Enter makes a new line and sends nothing; the Send button sends too.
  const box = page.getByLabel('Message', { exact: true });
  await box.fill('first line');
  await box.press('Shift+Enter');
  await box.pressSequentially('second line');
  check(await box.inputValue() === 'first line\nsecond line', `Shift+Enter made a new line: ${JSON.stringify(await box.inputValue())}`);
  check(await page.locator('[data-testid="message"]').count() === 0, 'Shift+Enter sent nothing');
  await box.fill('');
  await recordLiveText(page);
  await script([
    reply('', { reasoning: 'The user wants their notes: look in memory first.', tool_calls: [{ id: 'call_1', name: 'memory_list', arguments: '{}' }] }),
    reply('Your memory is empty, so here is a fresh start: streamed, then stored.', { delay_s: 0.02 }),
  ]);
  await send(page, 'What do you remember about me?');
  await page.waitForURL(/\/console\/chat\/c_[^/]+$/);
  await page.waitForSelector('[data-testid="live-answer"] [data-testid="tool-step"]', LONG);
  await answered(page, 1);
  const seen = await page.evaluate(() => window.liveSeen);
  const rows = await thread(page);
  check(rows.length === 2 && rows[1][0] === 'assistant' && rows[1][1] === 'text', `the thread holds the question and the stored answer: ${JSON.stringify(rows)}`);
  check(seen.length > 0 && rows[1][2].startsWith(seen[seen.length - 1]), `the streamed text (${JSON.stringify(seen.slice(-1))}) was replaced by the stored answer ${JSON.stringify(rows[1][2])}`);
  const answer = page.locator('[data-testid="message"][data-role="assistant"]');
  const thinking = answer.locator('[data-testid="thinking"]');
  check(await thinking.count() === 1 && await thinking.getAttribute('open') === null, 'the thinking is kept, folded');
  const tool = answer.locator('[data-testid="tool-step"]');
  check(await tool.count() === 1 && (await tool.textContent()).includes('memory_list'), 'the tool step is kept, folded');
  await tool.locator('summary').click();
  check(await tool.getAttribute('open') !== null, 'a tool step unfolds');
  await shot(page, 'chat-01-answered');

  // The list: two more conversations (setup over the API), then pin, rename and delete in the page.
  const api = await apiClient();
  const older = await api('/conversations', { method: 'POST', body: { title: `older-${rand()}` } });
  const newer = await api('/conversations', { method: 'POST', body: { title: `newer-${rand()}` } });
  await page.reload();
  await page.waitForSelector(`[data-testid="conversation"][data-id="${newer.id}"]`);
  const ids = () => page.$$eval('[data-testid="conversation"]', (els) => els.map((e) => e.dataset.id));
  let order = await ids();
  check(order.indexOf(newer.id) < order.indexOf(older.id), 'newest activity first');
  const row = (c) => page.locator(`[data-testid="conversation"][data-id="${c.id}"]`);
  await row(older).locator('[data-action="pin"]').click();
  await page.waitForSelector(`[data-testid="conversation"][data-id="${older.id}"][data-pinned="true"]`);
  order = await ids();
  check(order[0] === older.id, `a pinned conversation comes first: ${order}`);
  await row(older).locator('[data-action="rename"]').click();
  const dlg = page.locator('dialog[open]');
  await dlg.getByLabel('Title').fill('Renamed and pinned');
  await dlg.getByRole('button', { name: 'Rename' }).click();
  await row(older).getByText('Renamed and pinned').waitFor();
  check((await api(`/conversations/${older.id}`)).title === 'Renamed and pinned', 'the new title is stored');
  await shot(page, 'chat-02-list');
  page.once('dialog', (d) => d.accept());
  await row(newer).locator('[data-action="delete"]').click();
  await row(newer).waitFor({ state: 'detached' });
  const gone = await api(`/conversations/${newer.id}`).then(() => 'still there', (err) => err.message);
  check(/: 404 /.test(gone), `the deleted conversation is gone: ${gone}`);
  await row(older).locator('a').click();
  await page.waitForURL(new RegExp(`/console/chat/${older.id}$`));
  await page.waitForFunction(() => document.querySelector('[data-testid="chat-title"]')?.textContent === 'Renamed and pinned');
  check(await page.locator('[data-testid="message"]').count() === 0, 'an empty conversation shows no message');
}

export async function chat_queue({ page }) {
  await ensureScriptedChain(await apiClient());
  await openChat(page);
  await script([reply('{"steps": ["Read the question", "Answer it in one line"]}')]);
  await page.getByLabel('Mode', { exact: true }).selectOption('plan');
  await send(page, 'Plan first: what is a queue?');
  const plan = page.locator('[data-testid="live-answer"] [data-testid="plan"]');
  await plan.getByText('Answer it in one line').waitFor(LONG);
  await plan.locator('[data-action="approve"]').waitFor(LONG);
  // The first run waits for its approval: a second message must wait its turn.
  await Promise.all([
    page.waitForResponse((r) => r.request().method() === 'PATCH' && r.ok()),
    page.getByLabel('Mode', { exact: true }).selectOption('direct'),
  ]);
  await script([reply('A queue keeps order.'), reply('And this one waited its turn.')]);
  await send(page, 'And a second question.');
  const queued = page.locator('[data-testid="queued"]');
  await queued.waitFor();
  check(/1 run ahead/.test(await queued.textContent()), `the indicator says one run is ahead: ${await queued.textContent()}`);
  await shot(page, 'chat-03-plan-and-queued');
  // A reload re-attaches to both runs: the plan still asks for its approval, the second still waits.
  await page.reload();
  await plan.locator('[data-action="approve"]').waitFor(LONG);
  await queued.waitFor();
  check(await page.locator('[data-testid="live-answer"]').count() === 2, 'both runs are followed again after the reload');
  await plan.locator('[data-action="approve"]').click();
  await answered(page, 2);
  const rows = await thread(page);
  check(JSON.stringify(rows.map((r) => r[0])) === JSON.stringify(['user', 'assistant', 'user', 'assistant']), `answers in turn: ${JSON.stringify(rows)}`);
  check(rows[1][2] === 'A queue keeps order.' && rows[3][2] === 'And this one waited its turn.', `each stored answer in its place: ${JSON.stringify(rows)}`);
  check(await queued.count() === 0, 'no queued indicator once both answered');
  await shot(page, 'chat-04-queue-answered');
}

export async function chat_stop({ page }) {
  await ensureScriptedChain(await apiClient());
  await openChat(page);
  await page.getByLabel('Mode', { exact: true }).selectOption('direct');
  await script([hang(PARTIAL)]);
  await send(page, 'Tell me a long story.');
  await page.waitForFunction((t) => (document.querySelector('[data-testid="live-text"]')?.textContent || '') === t, PARTIAL, LONG);
  await page.click('[data-action="stop"]');
  await page.waitForSelector('[data-testid="message"][data-type="interrupted"]', LONG);
  const rows = await thread(page);
  check(rows.length === 2 && rows[1][1] === 'interrupted' && rows[1][2] === PARTIAL, `the partial answer is kept: ${JSON.stringify(rows)}`);
  check((await page.textContent('[data-testid="message"][data-type="interrupted"]')).includes('interrupted'), 'it is marked interrupted');
  check(await page.isDisabled('[data-action="stop"]'), 'nothing left to stop');
  await shot(page, 'chat-05-stopped');

  // A failure is an error message; the model picker's choice answers the next one.
  const conversation = page.url().split('/').pop();
  await (await apiClient())(`/conversations/${conversation}`, { method: 'PATCH', body: { model: 'no-such-model' } });
  await page.reload();
  await page.waitForFunction(() => document.querySelector('[data-testid="model"]')?.value === 'no-such-model');
  await send(page, 'Which model answers?');
  await page.waitForSelector('[data-testid="message"][data-type="error"]', LONG);
  const error = await page.textContent('[data-testid="message"][data-type="error"]');
  check(error.includes('Unknown model id') && error.includes('no-such-model'), `the error says why: ${error}`);
  await Promise.all([
    page.waitForResponse((r) => r.request().method() === 'PATCH' && r.ok()),
    page.getByLabel('Model', { exact: true }).selectOption('offline'),
  ]);
  await send(page, 'And now?');
  await answered(page, 3);
  const last = page.locator('[data-testid="message"][data-role="assistant"]').last();
  check(await last.getAttribute('data-type') === 'text' && (await last.textContent()).includes('offline'), `the offline model answered: ${await last.textContent()}`);
  await shot(page, 'chat-06-error-then-offline');
}

export async function chat_reload({ page }) {
  await ensureScriptedChain(await apiClient());
  await openChat(page);
  await page.getByLabel('Mode', { exact: true }).selectOption('direct');
  // The answer stops mid-stream (the server's gate) until the reload has re-attached: no race.
  const gate = `reload-${rand()}`;
  await script([reply(LONG_ANSWER, { chunk_chars: 6, delay_s: 0.02, gate, gate_after: 8 })]);
  await send(page, 'Answer slowly, please.');
  await page.waitForFunction(() => (document.querySelector('[data-testid="live-text"]')?.textContent || '').length >= 24, null, LONG);
  const before = await page.textContent('[data-testid="live-text"]');
  const url = page.url();
  await page.reload();
  check(page.url() === url, 'the reload stays on the conversation');
  // Re-attached: the same run's live answer is back, continues, and is then stored whole.
  await page.waitForSelector('[data-testid="live-text"]', LONG);
  const again = await page.textContent('[data-testid="live-text"]');
  check(again.startsWith(before) || before.startsWith(again), `the re-attached answer is the same one: ${JSON.stringify([before, again])}`);
  await recordLiveText(page);
  await release(gate);
  await answered(page, 1);
  const rows = await thread(page);
  check(rows.length === 2 && rows[1][2] === LONG_ANSWER, `the same answer finished: ${JSON.stringify(rows[1])}`);
  await shot(page, 'chat-07-reloaded');
}
