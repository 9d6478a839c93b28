// Runs console browser scenarios: `node run.mjs [name …]` (all when none given).
// Env: CONSOLE_URL, CONSOLE_USER, CONSOLE_PASSWORD, LLM_URL, SCREENSHOT_DIR, and for `newcomer`
// COLLEAGUE_USER / COLLEAGUE_TOKEN (a second, regular user).
// Exit code 0 only when every scenario passed; the last line is "N passed, N failed".

import { launch, shot, watchErrors } from './lib.mjs';
import { scenarios } from './scenarios.mjs';

const names = process.argv.slice(2).length ? process.argv.slice(2) : Object.keys(scenarios);
const unknown = names.filter((n) => !scenarios[n]);
if (unknown.length) {
  console.error(`unknown scenario(s): ${unknown.join(', ')}; known: ${Object.keys(scenarios).join(', ')}`);
  process.exit(2);
}

let passed = 0;
let failed = 0;
for (const name of names) {
  const browser = await launch();
  const page = await browser.context.newPage();
  page.setDefaultTimeout(20000);
  const errors = watchErrors(page);
  const started = Date.now();
  try {
    await scenarios[name]({ page, context: browser.context });
    if (errors.length) throw new Error(`the page reported errors:\n${errors.join('\n')}`);
    passed += 1;
    console.log(`ok ${name} (${((Date.now() - started) / 1000).toFixed(1)} s)`);
  } catch (err) {
    failed += 1;
    console.log(`FAIL ${name}: ${err.stack || err}`);
    if (errors.length) console.log(errors.join('\n'));
    try { console.log(`screenshot: ${await shot(page, `FAILED-${name}`)}`); } catch { /* page gone */ }
  } finally {
    await browser.close();
  }
}
console.log(`${passed} passed, ${failed} failed`);
process.exit(failed ? 1 : 0);
