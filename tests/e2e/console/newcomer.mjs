// Scenario `newcomer`: what a newcomer trips over in the first hour (issue 15), checked on
// the rendered page: overlapping branch labels, KBs without owners, dates broken over lines.

import { env, check, shot, login, apiClient, rand, example } from './lib.mjs';

/** Screen boxes of every element matching `selector`, named by their handle, their node id or else their text. */
async function boxes(page, selector) {
  return page.$$eval(selector, (els) => els.map((el) => {
    const r = el.getBoundingClientRect();
    const name = el.dataset.handle ?? el.closest('[data-node-id]')?.dataset.nodeId ?? el.textContent;
    return { name, left: r.left, right: r.right, top: r.top, bottom: r.bottom };
  }));
}

function intersect(a, b) {
  return a.left < b.right && b.left < a.right && a.top < b.bottom && b.top < a.bottom;
}

/** How many lines each matching element's text takes (one client rect per line box). */
async function lineCounts(page, selector) {
  return page.$$eval(selector, (els) => els.map((el) => {
    const range = document.createRange();
    range.selectNodeContents(el);
    return new Set([...range.getClientRects()].filter((r) => r.width > 0).map((r) => Math.round(r.top))).size;
  }));
}

// What a newcomer trips over in the first hour: branch labels drawn on top of each other,
// another user's KB without its owner, a run's date broken over two lines.
export async function newcomer({ page }) {
  const api = await apiClient();
  const colleague = process.env.COLLEAGUE_USER;
  const colleagueToken = process.env.COLLEAGUE_TOKEN;
  check(colleague && colleagueToken, 'COLLEAGUE_USER and COLLEAGUE_TOKEN are not set');
  await login(page);

  // 1. The `true` and `false` labels of a branch node never overlap each other or a node.
  await page.goto(`${env.url}/console/runs/new`);
  await page.fill('textarea[aria-label="Workflow DSL (JSON)"]', example('branch_fanout.json'));
  await page.waitForSelector('[data-testid="preview"] .edge-label');
  const labels = await boxes(page, '[data-testid="preview"] .edge-label');
  check(labels.map((l) => l.name).sort().join() === 'false,true', `one label per handle of the branch: ${labels.map((l) => l.name)}`);
  const nodes = await boxes(page, '[data-testid="preview"] .wf-node');
  for (const [i, a] of labels.entries()) {
    for (const b of labels.slice(i + 1)) check(!intersect(a, b), `the edge labels ${a.name} and ${b.name} overlap: ${JSON.stringify([a, b])}`);
    for (const n of nodes) check(!intersect(a, n), `the edge label ${a.name} covers node ${n.name}`);
  }
  await shot(page, '18-branch-labels');

  // 2. An admin's KB list names each KB's owner, and opens another user's KB.
  const mine = `mine ${rand()}`;
  const theirs = `theirs ${rand()}`;
  await api('/kb', { method: 'POST', body: { name: mine } });
  const made = await fetch(`${env.url}/api/v1/kb`, {
    method: 'POST',
    headers: { Authorization: `Bearer ${colleagueToken}`, 'Content-Type': 'application/json' },
    body: JSON.stringify({ name: theirs, description: 'not the admin\'s' }),
  });
  check(made.status === 201, `the colleague could not create a KB: ${made.status} ${await made.text()}`);
  await page.goto(`${env.url}/console/kb`);
  await page.waitForSelector(`[data-testid="kb-list"] tr[data-kb="${theirs}"]`);
  const heads = await page.$$eval('[data-testid="kb-list"] thead th', (ths) => ths.map((th) => th.textContent));
  check(heads.includes('Owner'), `the admin's KB list has an owner column (${heads})`);
  const owner = (kb) => page.textContent(`[data-testid="kb-list"] tr[data-kb="${kb}"] td[data-label="Owner"]`);
  check((await owner(theirs)).trim() === colleague, `the colleague's KB shows its owner (${await owner(theirs)})`);
  check((await owner(mine)).includes(env.user), `the admin's own KB shows the admin (${await owner(mine)})`);
  await shot(page, '19-kb-owners');
  await page.click(`[data-testid="kb-list"] tr[data-kb="${theirs}"] a`);
  await page.waitForSelector('[data-testid="kb-owner"]');
  check((await page.textContent('h1')).includes(theirs), 'the colleague\'s KB opens by id and shows its name');
  await page.waitForSelector('[data-testid="documents"] .empty');

  // 3. A run's date stays on one line, in a wide and in a laptop-sized window.
  await api('/tasks', { method: 'POST', body: { dsl: JSON.parse(example('hello.json')), input: { text: 'a run to list' } } });
  for (const width of [1280, 1024, 800]) {
    await page.setViewportSize({ width, height: 800 });
    await page.goto(`${env.url}/console/runs`);
    await page.waitForSelector('[data-testid="task-list"] tr[data-task]');
    const lines = await lineCounts(page, '[data-testid="task-list"] tbody td[data-label="Created"]');
    check(lines.length > 0 && lines.every((n) => n === 1), `at ${width}px every Created date is one line (${lines})`);
  }
  await shot(page, '20-runs-800px');
  // On a phone each row is a card of label/value lines: a state badge keeps its own width.
  await page.setViewportSize({ width: 390, height: 844 });
  await page.goto(`${env.url}/console/runs`);
  await page.waitForSelector('[data-testid="task-list"] tr[data-task] .badge');
  const badges = await boxes(page, '[data-testid="task-list"] td[data-label="State"] .badge');
  check(badges.every((b) => b.right - b.left < 120), `state badges fill the card's row: ${badges.map((b) => Math.round(b.right - b.left))} px`);
}
