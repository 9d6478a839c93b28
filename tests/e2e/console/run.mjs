// Runs console browser scenarios in one chromium, each in a context of its own.
// `node run.mjs [name …]`: those (all when none given); exit code 0 only when every scenario
//   passed; the last line is "N passed, N failed".
// `node run.mjs --serve`: one request a line on stdin, `{"scenario": NAME, "env": {…}}` (`env`:
//   variables that scenario reads, such as MCP_URL, set before it runs); each is answered with
//   "ok NAME (…)" or "FAIL NAME: …" and then "done NAME". The pytest modules drive it so, and
//   chromium starts once for all of them.
// Env: CONSOLE_URL, CONSOLE_USER, CONSOLE_PASSWORD, LLM_URL, SCREENSHOT_DIR, and for `newcomer`
// COLLEAGUE_USER / COLLEAGUE_TOKEN (a second, regular user).

import { createInterface } from 'node:readline';
import { launchBrowser, newContext, shot, watchErrors } from './lib.mjs';
import { scenarios } from './scenarios.mjs';

let browser = await launchBrowser();

/** Run one scenario in a new context; true when it passed. */
async function runOne(name) {
  if (!browser.isConnected()) browser = await launchBrowser(); // an earlier scenario crashed it
  const context = await newContext(browser);
  const page = await context.newPage();
  page.setDefaultTimeout(20000);
  const errors = watchErrors(page);
  const started = Date.now();
  try {
    await scenarios[name]({ page, context });
    if (errors.length) throw new Error(`the page reported errors:\n${errors.join('\n')}`);
    console.log(`ok ${name} (${((Date.now() - started) / 1000).toFixed(1)} s)`);
    return true;
  } catch (err) {
    console.log(`FAIL ${name}: ${err.stack || err}`);
    if (errors.length) console.log(errors.join('\n'));
    try { console.log(`screenshot: ${await shot(page, `FAILED-${name}`)}`); } catch { /* page gone */ }
    return false;
  } finally {
    await context.close().catch(() => {});
  }
}

if (process.argv[2] === '--serve') {
  for await (const line of createInterface({ input: process.stdin })) {
    if (!line.trim()) continue;
    const { scenario, env = {} } = JSON.parse(line);
    Object.assign(process.env, env);
    if (scenarios[scenario]) await runOne(scenario);
    else console.log(`FAIL ${scenario}: unknown scenario; known: ${Object.keys(scenarios).join(', ')}`);
    console.log(`done ${scenario}`);
  }
  await browser.close();
  process.exit(0);
}

const names = process.argv.slice(2).length ? process.argv.slice(2) : Object.keys(scenarios);
const unknown = names.filter((n) => !scenarios[n]);
if (unknown.length) {
  console.error(`unknown scenario(s): ${unknown.join(', ')}; known: ${Object.keys(scenarios).join(', ')}`);
  process.exit(2);
}
let passed = 0;
for (const name of names) if (await runOne(name)) passed += 1;
await browser.close();
console.log(`${passed} passed, ${names.length - passed} failed`);
process.exit(passed === names.length ? 0 : 1);
