// Scenario `keys`: a user makes a chat-only API key on the Keys page, sees it once, uses it as
// an OpenAI client would (`/v1`, accepted) and on the API (`/api/v1`, refused: not its scope),
// finds only its prefix in the list afterwards, has a key without a scope refused with the
// server's reason, and revokes the key from the page: refused from then on.

import { env, check, shot, login, rand } from './lib.mjs';

const LONG = { timeout: 30000 };

function row(page, name) {
  return page.locator(`[data-testid="key-list"] tr[data-key="${name}"]`);
}

async function withKey(key, path) {
  return (await fetch(`${env.url}${path}`, { headers: { Authorization: `Bearer ${key}` } })).status;
}

export async function keys({ page }) {
  const name = `ui-${rand()}`;
  await login(page);
  await page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'Keys' }).click();
  await page.waitForURL(/\/console\/keys$/);
  await page.waitForSelector('[data-testid="key-list"]:not(:has-text("Loading"))');

  // 1. No scope ticked: the server's reason is shown, nothing is made.
  await page.getByLabel('Name', { exact: true }).fill(name);
  for (const scope of ['chat', 'mcp', 'api', 'admin']) await page.locator(`#scope-${scope}`).setChecked(false);
  const [refused] = await Promise.all([
    page.waitForResponse((r) => r.url().endsWith('/api/v1/keys') && r.request().method() === 'POST'),
    page.click('[data-action="make-key"]'),
  ]);
  check(refused.status() === 400, `a key without scopes answered ${refused.status()}`);
  await page.getByText('A key needs at least one scope.').waitFor(LONG);

  // 2. Chat only, 30 days: the key is shown once, in a dialog.
  await page.locator('#scope-chat').setChecked(true);
  await page.getByLabel('Expires', { exact: true }).selectOption('30d');
  const [created] = await Promise.all([
    page.waitForResponse((r) => r.url().endsWith('/api/v1/keys') && r.request().method() === 'POST'),
    page.click('[data-action="make-key"]'),
  ]);
  check(created.status() === 201, `POST answered ${created.status()}: ${await created.text()}`);
  const key = (await page.locator('[data-testid="new-key"]').textContent()).trim();
  check(key.startsWith('agx_'), `the dialog shows the key (${key.slice(0, 6)}…)`);
  await shot(page, '40-key-made', { fullPage: false });
  await page.locator('dialog[open]').getByRole('button', { name: 'Done' }).click();
  await page.locator('dialog[open]').waitFor({ state: 'detached' });

  // 3. Listed by prefix only, active, chat; the key itself is nowhere in the page any more.
  await row(page, name).waitFor(LONG);
  check(await row(page, name).getAttribute('data-state') === 'active', 'the new key is active');
  const text = await row(page, name).textContent();
  check(text.includes(key.slice(0, 12)) && text.includes('chat'), `the row shows the prefix and scope: ${text}`);
  check(!(await page.content()).includes(key), 'the key is not shown again');

  // 4. It works where its scope reaches, and only there.
  check(await withKey(key, '/v1/models') === 200, 'the key lists /v1 models');
  check(await withKey(key, '/api/v1/keys') === 403, 'a chat key cannot reach /api/v1');

  // 5. Revoke from the page (confirmed): refused at once.
  page.once('dialog', (d) => d.accept());
  await row(page, name).getByRole('button', { name: `Revoke ${name}` }).click();
  await row(page, name).and(page.locator('[data-state="revoked"]')).waitFor(LONG);
  await shot(page, '41-key-revoked');
  check(await withKey(key, '/v1/models') === 401, 'a revoked key is refused');
}
