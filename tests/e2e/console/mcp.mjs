// Scenario `mcp`: an admin registers an external MCP server (MCP_URL, which wants the bearer
// token MCP_TOKEN) on the MCP servers page with a header, sees it connect with its two tools,
// finds the header nowhere in the page or the API, keeps it through an edit, disables it and
// enables it again (the bridges' state follows), and deletes it.

import { env, check, shot, login, apiClient, rand } from './lib.mjs';

const LONG = { timeout: 30000 };

function row(page, name) {
  return page.locator(`[data-testid="mcp-servers"] tr[data-server="${name}"]`);
}

async function stateIs(page, name, state) {
  await row(page, name).locator(`[data-state="${state}"]`).waitFor(LONG);
}

export async function mcp({ page }) {
  check(process.env.MCP_URL && process.env.MCP_TOKEN, 'MCP_URL and MCP_TOKEN are set');
  const api = await apiClient();
  const name = `calc-${rand()}`;
  await login(page);
  await page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'MCP servers' }).click();
  await page.waitForURL(/\/console\/mcp$/);
  await page.waitForSelector('[data-testid="mcp-servers"]:not(:has-text("Loading"))');

  // 1. Add it, with its token as a header.
  await page.click('[data-action="add-mcp"]');
  const dlg = page.locator('dialog[open]');
  await dlg.getByLabel('Name', { exact: true }).fill(name);
  await dlg.getByLabel('URL', { exact: true }).fill(process.env.MCP_URL);
  await dlg.getByLabel('Headers', { exact: true }).fill(`Authorization: Bearer ${process.env.MCP_TOKEN}`);
  await dlg.getByLabel('High-risk tools', { exact: true }).fill('shout');
  await shot(page, '30-mcp-add', { fullPage: false });
  const [created] = await Promise.all([
    page.waitForResponse((r) => r.url().endsWith('/api/v1/admin/mcp-servers') && r.request().method() === 'POST'),
    dlg.locator('[data-action="save-mcp"]').click(),
  ]);
  check(created.status() === 201, `POST answered ${created.status()}: ${await created.text()}`);
  await dlg.waitFor({ state: 'detached' });

  // 2. The bridges connect: state and tool count on the page; the header is stored, never shown.
  await stateIs(page, name, 'connected');
  await row(page, name).locator('[data-tools]', { hasText: '2' }).waitFor(LONG);
  check((await row(page, name).textContent()).includes('stored'), 'the row says headers are stored');
  check(!(await page.content()).includes(process.env.MCP_TOKEN), 'the token is nowhere in the page');
  const listed = JSON.stringify(await api('/admin/mcp-servers'));
  check(!listed.includes(process.env.MCP_TOKEN) && listed.includes('"has_headers":true'), 'the API never returns the header');
  await shot(page, '31-mcp-connected');

  // 3. Editing without typing headers keeps them (the server stays connected).
  await row(page, name).getByRole('button', { name: `Edit ${name}` }).click();
  const edit = page.locator('dialog[open]');
  check((await edit.getByLabel('Headers', { exact: true }).getAttribute('placeholder')).includes('stored'), 'the edit form says headers are stored');
  check(await edit.getByLabel('Headers', { exact: true }).inputValue() === '', 'the edit form does not show the stored headers');
  const [saved] = await Promise.all([
    page.waitForResponse((r) => r.url().includes('/api/v1/admin/mcp-servers/') && r.request().method() === 'PUT'),
    edit.locator('[data-action="save-mcp"]').click(),
  ]);
  check(!('headers' in saved.request().postDataJSON()), 'a save without typed headers does not send any');
  check((await saved.json()).has_headers === true, 'the headers are still stored');

  // 4. Disable: the state says so and its tools leave the registry; then enable again.
  await row(page, name).getByRole('button', { name: `Disable ${name}` }).click();
  await stateIs(page, name, 'disabled');
  await shot(page, '32-mcp-disabled');
  await row(page, name).getByRole('button', { name: `Enable ${name}` }).click();
  await stateIs(page, name, 'connected');

  // 5. Delete (confirmed): the row goes.
  page.once('dialog', (d) => d.accept());
  await row(page, name).getByRole('button', { name: `Delete ${name}` }).click();
  await row(page, name).waitFor({ state: 'detached', ...LONG });
  check(!JSON.stringify(await api('/admin/mcp-servers')).includes(name), 'the server is deleted');
}
