// Scenarios of the workflow editor (/console/editor):
// - `editor_build`: examples/branch_fanout.json built from an empty canvas by mouse (kinds dragged
//   from the palette, handles connected by dragging), its forms filled (a template completed from
//   an upstream node), a validation error pinned on a node that goes away; undo/redo restores a
//   deleted edge; saved (Ctrl+S), reloaded, saved again as a version, a version restored; run from
//   the canvas (Ctrl+Enter): both parallel nodes light up, tokens stream in the side panel, the
//   task ends done and a finished node opens its trace;
// - `editor_examples`: every example imports and exports to identical DSL;
// - `editor_clipboard`: two nodes copied with Ctrl+C in one tab and pasted with Ctrl+V in another;
//   multi-select and Delete;
// - `editor_approval`: approval.json run from the canvas asks in place on its approval node;
// - `editor_perf`: a 200-node workflow: frames per second while dragging a node and panning, and
//   the validation round trip, measured in the browser and written to artifacts/console-perf.json.

import { mkdtempSync, readFileSync, writeFileSync, mkdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, dirname } from 'node:path';
import { env, check, shot, login, apiClient, ensureScriptedChain, example, script, reply } from './lib.mjs';

const LONG = { timeout: 60000 };
const NODE = { w: 172, h: 58 };
// Every model call of a run answers this, ~2 s of streaming: slow enough to watch nodes light up.
const SLOW = reply('A streamed answer for the canvas: every token shows in the side panel as it comes, '
  + 'and the node stays lit while it runs. '.repeat(2), { chunk_chars: 4, delay_s: 0.03 });

/** A JSON value with its object keys sorted: two documents equal as data compare equal as text. */
function canonical(value) {
  if (Array.isArray(value)) return value.map(canonical);
  if (value && typeof value === 'object') return Object.fromEntries(Object.keys(value).sort().map((k) => [k, canonical(value[k])]));
  return value;
}

async function openEditor(page, path = '/editor') {
  await page.goto(`${env.url}/console${path}`);
  await page.locator('[data-testid="palette"] button[data-kind="agent"]').waitFor();
}

/** Drag a kind from the palette onto the canvas so the new node's top-left lands at (x, y). */
async function dropKind(page, kind, x, y) {
  const before = await page.locator('.react-flow__node').count();
  const label = { input: 'Input', branch: 'Branch', agent: 'Agent', output: 'Output', approval: 'Approval' }[kind];
  await page.getByRole('navigation', { name: 'Node kinds' }).getByRole('button', { name: label, exact: true })
    .dragTo(page.locator('.canvas .react-flow__pane'), { targetPosition: { x: x + NODE.w / 2, y: y + NODE.h / 2 } });
  await page.waitForFunction((n) => document.querySelectorAll('.react-flow__node').length === n + 1, before);
}

async function rename(page, id) {
  const field = page.getByLabel('Id', { exact: true });
  await field.fill(id);
  await field.press('Enter');
  await page.locator(`[data-node-id="${id}"]`).waitFor();
}

async function connect(page, from, to) {
  const edges = await page.locator('.react-flow__edge').count();
  await page.getByLabel(from, { exact: true }).dragTo(page.getByLabel(to, { exact: true }));
  await page.waitForFunction((n) => document.querySelectorAll('.react-flow__edge').length === n + 1, edges);
}

async function clickNode(page, id) {
  await page.locator(`.react-flow__node[data-id="${id}"]`).click({ position: { x: 40, y: 12 } });
}

async function selectNode(page, id) {
  await clickNode(page, id);
  await page.locator(`[data-testid="node-form"][data-node="${id}"]`).waitFor();
}

/** The canvas's document, through Export (a download). */
async function exported(page) {
  const [download] = await Promise.all([page.waitForEvent('download'), page.getByRole('button', { name: 'Export', exact: true }).click()]);
  return readFileSync(await download.path(), 'utf8');
}

async function noProblems(page) {
  await page.waitForSelector('[data-testid="problems"][data-count="0"][data-pending="false"]', LONG);
}

async function importFile(page, path) {
  await page.setInputFiles('input[aria-label="Import DSL file"]', path);
}

export async function editor_build({ page, context }) {
  await ensureScriptedChain(await apiClient());
  await script([], SLOW);
  await login(page);
  await openEditor(page);
  check(await page.locator('.react-flow__node').count() === 0, 'the canvas starts empty');
  await shot(page, 'canvas-01-empty', { fullPage: false });

  // 1. Zoomed out a step (the canvas's control), drag every kind onto the canvas and name it.
  await page.locator('.react-flow__controls-zoomout').click();
  const col = [12, 192, 372, 552];
  const row = [8, 120, 232, 344];
  const place = [['input', 'in', 0, 1], ['branch', 'route', 1, 1], ['agent', 'facts', 2, 0], ['agent', 'risks', 2, 1], ['agent', 'note', 2, 3],
    ['agent', 'merge', 3, 0], ['output', 'out', 3, 1], ['output', 'out_note', 3, 3]];
  for (const [kind, id, c, r] of place) {
    await dropKind(page, kind, col[c], row[r]);
    await rename(page, id);
  }
  // A new agent has no prompt: the validator's message is pinned on it.
  const factsProblem = page.locator('[data-node-id="facts"] [data-testid="node-problem"]');
  await factsProblem.waitFor(LONG);
  check(/prompt/.test(await factsProblem.textContent()), `the problem on facts names its prompt: ${await factsProblem.textContent()}`);
  // The problem list is clickable: it selects the node a problem is about.
  await page.locator('[data-testid="problems"] button[data-node="facts"]').first().click();
  await page.locator('[data-testid="node-form"][data-node="facts"]').waitFor();

  // 2. Connect the handles by dragging.
  for (const [from, to] of [['in output', 'route input'], ['route output true', 'facts input'], ['route output true', 'risks input'],
    ['route output false', 'note input'], ['facts output', 'merge input'], ['risks output', 'merge input'], ['merge output', 'out input'],
    ['note output', 'out_note input']]) {
    await connect(page, from, to);
  }

  // 3. The forms. The input's schema as JSON; a template completed from an upstream node.
  const want = JSON.parse(example('branch_fanout.json'));
  const config = (id) => want.nodes.find((n) => n.id === id).config;
  await selectNode(page, 'in');
  await page.getByLabel('Input schema (JSON Schema)').fill(JSON.stringify(config('in').schema, null, 2));
  await selectNode(page, 'route');
  await page.getByLabel('Condition', { exact: true }).fill(config('route').condition);
  await selectNode(page, 'facts');
  await shot(page, 'canvas-02-validation-error', { fullPage: false });
  const prompt = page.getByLabel('Prompt', { exact: true });
  await prompt.fill('List the key facts needed to answer: {{ i');
  const option = page.getByRole('option', { name: /^in\.text/ });
  await option.waitFor();
  check(!(await page.getByRole('listbox', { name: 'Upstream outputs' }).textContent()).includes('merge'), 'only upstream nodes are offered');
  await option.click();
  check(await prompt.inputValue() === config('facts').prompt, `the completion wrote the template: ${await prompt.inputValue()}`);
  await factsProblem.waitFor({ state: 'detached', ...LONG }); // the error went away
  for (const id of ['risks', 'note', 'merge']) {
    await selectNode(page, id);
    await page.getByLabel('Prompt', { exact: true }).fill(config(id).prompt);
  }
  for (const id of ['out', 'out_note']) {
    await selectNode(page, id);
    await page.getByLabel('Value', { exact: true }).fill(config(id).value);
  }
  await selectNode(page, 'merge');
  await noProblems(page);
  await shot(page, 'canvas-03-editing', { fullPage: false });
  const built = JSON.parse(await exported(page));
  check(JSON.stringify(canonical(built)) === JSON.stringify(canonical(want)),
    `the canvas built branch_fanout.json:\n${JSON.stringify(built)}\nvs\n${JSON.stringify(want)}`);

  // 4. Undo/redo restores an edge: facts → merge, clicked on its line and deleted.
  const edgeCount = await page.locator('.react-flow__edge').count();
  const line = page.locator('.react-flow__edge[aria-label="Edge from facts to merge"] path.react-flow__edge-interaction');
  const mid = await line.evaluate((p) => {
    const q = p.getPointAtLength(p.getTotalLength() / 2);
    const m = p.getScreenCTM();
    return { x: q.x * m.a + q.y * m.c + m.e, y: q.x * m.b + q.y * m.d + m.f };
  });
  await page.mouse.click(mid.x, mid.y);
  await page.locator('.react-flow__edge.selected[aria-label="Edge from facts to merge"]').waitFor({ state: 'attached' });
  await page.keyboard.press('Delete');
  await page.waitForFunction((n) => document.querySelectorAll('.react-flow__edge').length === n - 1, edgeCount);
  const lost = JSON.parse(await exported(page)).edges;
  check(lost.length === want.edges.length - 1 && !lost.some((e) => e.source === 'facts' && e.target === 'merge'), `facts → merge deleted (${JSON.stringify(lost)})`);
  await page.locator('.react-flow__pane').click({ position: { x: 700, y: 500 } });
  await page.keyboard.press('Control+z');
  await page.waitForFunction((n) => document.querySelectorAll('.react-flow__edge').length === n, edgeCount);
  check(JSON.stringify(JSON.parse(await exported(page)).edges) === JSON.stringify(built.edges), 'undo restored the edge in its place');
  await page.keyboard.press('Control+y');
  await page.waitForFunction((n) => document.querySelectorAll('.react-flow__edge').length === n - 1, edgeCount);
  await page.keyboard.press('Control+z');
  await page.waitForFunction((n) => document.querySelectorAll('.react-flow__edge').length === n, edgeCount);

  // 5. Save (Ctrl+S), reload, the same workflow comes back.
  await page.keyboard.press('Control+s');
  await page.getByLabel('Workflow name').fill('Branch fan-out (drawn)');
  await page.locator('[data-action="confirm-save"]').click();
  await page.waitForURL(/\/console\/editor\/wf_[^/]+$/);
  await page.getByText('v1', { exact: true }).waitFor();
  await page.reload();
  await page.locator('.react-flow__node[data-id="out_note"]').waitFor();
  check(JSON.stringify(JSON.parse(await exported(page))) === JSON.stringify(built), 'the reloaded workflow is the saved one');
  await noProblems(page);

  // 6. Saving again makes a version; the list diffs and restores one.
  await selectNode(page, 'merge');
  await page.getByLabel('Label', { exact: true }).fill('Merge both');
  await page.keyboard.press('Control+s');
  await page.getByText('v2', { exact: true }).waitFor();
  await page.getByRole('button', { name: 'Versions' }).click();
  const versions = page.locator('dialog[open]');
  await versions.locator('[data-version="1"]').waitFor();
  check(await versions.locator('[data-version]').count() === 2, 'two versions listed');
  await versions.getByRole('button', { name: 'Version 1' }).click();
  await versions.locator('.diff .add').first().waitFor();
  check((await versions.locator('.diff .add').allTextContents()).join('').includes('Merge both'), 'the diff shows the new label');
  await versions.locator('[data-action="restore"]').click();
  await page.getByText('v3', { exact: true }).waitFor();
  check(JSON.stringify(JSON.parse(await exported(page))) === JSON.stringify(built), 'the restored version is version 1');

  // An empty canvas, then Open… the saved workflow.
  const saved = page.url();
  await page.getByRole('button', { name: 'New', exact: true }).click();
  await page.waitForURL(/\/console\/editor$/);
  await page.waitForFunction(() => document.querySelectorAll('.react-flow__node').length === 0);
  await page.getByRole('button', { name: 'Open…' }).click();
  await page.locator('dialog[open]').getByRole('button', { name: 'Branch fan-out (drawn)' }).first().click();
  await page.waitForURL(saved);
  await page.locator('.react-flow__node[data-id="out_note"]').waitFor();
  check(JSON.stringify(JSON.parse(await exported(page))) === JSON.stringify(built), 'Open brought the saved workflow back');

  // 7. Run from the canvas: both parallel nodes light up, tokens stream, the task ends done.
  await page.evaluate(() => {
    window.running = new Set();
    window.together = false;
    new MutationObserver(() => {
      for (const el of document.querySelectorAll('[data-node-id]')) {
        if (el.dataset.status === 'running') window.running.add(el.dataset.nodeId); else window.running.delete(el.dataset.nodeId);
      }
      if (window.running.has('facts') && window.running.has('risks')) window.together = true;
    }).observe(document.querySelector('.react-flow'), { subtree: true, attributes: true, attributeFilter: ['data-status'] });
  });
  await page.locator('.react-flow__pane').click({ position: { x: 700, y: 500 } });
  await page.keyboard.press('Control+Enter');
  const runDialog = page.locator('dialog[open]');
  await runDialog.locator('textarea[name="text"], input[name="text"]').fill('How do we roll out a new model safely?');
  await runDialog.locator('[data-action="start-run"]').click();
  await page.waitForSelector('[data-node-id="facts"][data-status="running"]', LONG);
  await clickNode(page, 'facts'); // the side panel shows the run: the selected node's tokens stream there
  await page.waitForFunction(() => (document.querySelector('[data-testid="tokens"][data-node="facts"]')?.textContent || '').length > 20, null, LONG);
  await shot(page, 'canvas-04-live-run', { fullPage: false });
  await page.waitForSelector('[data-testid="canvas-run"] [data-testid="run-status"] .badge-done', LONG);
  check(await page.evaluate(() => window.together), 'facts and risks ran at the same time');
  for (const id of ['in', 'route', 'facts', 'risks', 'merge', 'out']) await page.waitForSelector(`[data-node-id="${id}"][data-status="done"]`);
  for (const id of ['note', 'out_note']) check(await page.getAttribute(`[data-node-id="${id}"]`, 'data-status') === 'skipped', `${id} was skipped`);
  await clickNode(page, 'merge'); // a finished node opens its trace
  await page.waitForSelector('[data-testid="canvas-run"] [data-testid="node-panel"][data-node="merge"] [data-testid="node-output"]');
  check((await page.textContent('[data-testid="canvas-run"] [data-testid="final-output"]')).includes('"out"'), 'the run shows its output');
  void context;
}

export async function editor_examples({ page }) {
  await login(page);
  await openEditor(page);
  for (const name of ['hello.json', 'branch_fanout.json', 'approval.json', 'map_summaries.json']) {
    await importFile(page, join(env.examples, name));
    const text = await exported(page);
    const want = `${JSON.stringify(JSON.parse(example(name)), null, 2)}\n`;
    check(text === want, `${name} exports as it was imported:\n${text}\nvs\n${want}`);
    await noProblems(page);
  }
  // The tool picker lists the live tool registry, with each tool's description and arguments.
  await page.getByRole('button', { name: 'New', exact: true }).click();
  await page.getByRole('navigation', { name: 'Node kinds' }).getByRole('button', { name: 'Tool', exact: true }).click();
  const picker = page.getByTestId('side-panel').getByLabel('Tool', { exact: true });
  await page.waitForFunction(() => [...document.querySelectorAll('[data-testid="node-form"] select option')].some((o) => o.value === 'kb_search'));
  await picker.selectOption('kb_search');
  const help = await page.textContent('[data-testid="tool-help"]');
  check(/query/.test(help) && help.length > 20, `the picker shows the tool's description and arguments: ${help}`);
  await importFile(page, join(env.examples, 'map_summaries.json'));
  await page.locator('.react-flow__node[data-id="each"]').waitFor();

  // The JSON view edits the same document.
  await page.getByRole('button', { name: 'JSON', exact: true }).click();
  const view = page.getByLabel('DSL JSON', { exact: true });
  check(JSON.parse(await view.inputValue()).nodes.length === 3, 'the JSON view shows the document');
  const doc = JSON.parse(await view.inputValue());
  doc.nodes.find((n) => n.id === 'out').label = 'Summaries';
  await view.fill(JSON.stringify(doc, null, 2));
  await page.locator('[data-node-id="out"]', { hasText: 'Summaries' }).waitFor();

  // A problem of an edge is pinned on that edge (and listed with its index).
  await importFile(page, join(env.examples, 'branch_fanout.json'));
  await page.locator('.react-flow__node[data-id="out_note"]').waitFor();
  const fanout = JSON.parse(await view.inputValue());
  fanout.edges[1].sourceHandle = 'maybe';
  await view.fill(JSON.stringify(fanout, null, 2));
  await page.locator('.react-flow__edge.edge-problem[aria-label="Edge from route to facts"]').waitFor({ state: 'attached', ...LONG });
  const listed = await page.textContent('[data-testid="problems"] button[data-edge="1"]');
  check(/bad_handle/.test(listed) && /maybe/.test(listed), `the edge's problem is listed: ${listed}`);
  fanout.edges[1].sourceHandle = 'true';
  await view.fill(JSON.stringify(fanout, null, 2));
  await noProblems(page);
  check(await page.locator('.react-flow__edge.edge-problem').count() === 0, 'the edge problem went away');
}

export async function editor_clipboard({ page, context }) {
  await context.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: env.url });
  await login(page);
  await openEditor(page);
  await importFile(page, join(env.examples, 'hello.json'));
  await page.locator('.react-flow__node[data-id="out"]').waitFor();
  await page.locator('.react-flow__node[data-id="ans"]').click({ position: { x: 40, y: 12 } });
  await page.locator('.react-flow__node[data-id="out"]').click({ position: { x: 40, y: 12 }, modifiers: ['Control'] });
  check(await page.locator('.react-flow__node.selected').count() === 2, 'two nodes selected');
  await page.keyboard.press('Control+c');
  const other = await context.newPage(); // a tab of its own: its own session, the same clipboard
  await login(other);
  await openEditor(other);
  await other.locator('.react-flow__pane').click({ position: { x: 300, y: 200 } });
  await other.keyboard.press('Control+v');
  await other.locator('.react-flow__node[data-id="out"]').waitFor();
  const pasted = JSON.parse(await exported(other));
  const hello = JSON.parse(example('hello.json'));
  check(JSON.stringify(pasted.nodes) === JSON.stringify(hello.nodes.slice(1)) && JSON.stringify(pasted.edges) === JSON.stringify([hello.edges[1]]),
    `the other tab pasted the two nodes and their edge: ${JSON.stringify(pasted)}`);
  // Pasting again in the first tab: fresh ids; then both copies deleted at once.
  await page.locator('.react-flow__pane').click({ position: { x: 500, y: 350 } });
  await page.keyboard.press('Control+v');
  await page.locator('.react-flow__node[data-id="ans_2"]').waitFor();
  await page.keyboard.press('Delete');
  await page.locator('.react-flow__node[data-id="ans_2"]').waitFor({ state: 'detached' });
  check(JSON.stringify(JSON.parse(await exported(page))) === JSON.stringify(hello), 'Delete removed the pasted (selected) nodes only');
  await other.close();
}

export async function editor_approval({ page }) {
  await ensureScriptedChain(await apiClient());
  await script([], SLOW);
  await login(page);
  await openEditor(page);
  await importFile(page, join(env.examples, 'approval.json'));
  await page.locator('.react-flow__node[data-id="review"]').waitFor();
  await page.getByRole('button', { name: 'Run', exact: true }).click();
  await page.locator('dialog[open] textarea[name="text"], dialog[open] input[name="text"]').fill('the canvas editor');
  await page.locator('dialog[open] [data-action="start-run"]').click();
  const ask = page.locator('[data-node-id="review"] [data-testid="node-approval"] [data-action="approve"]');
  await ask.waitFor(LONG);
  check(await page.getAttribute('[data-node-id="review"]', 'data-status') === 'waiting', 'the approval node waits');
  await shot(page, 'canvas-05-approval-in-place', { fullPage: false });
  await ask.click();
  await page.waitForSelector('[data-testid="canvas-run"] [data-testid="run-status"] .badge-done', LONG);
  await page.waitForSelector('[data-node-id="review"][data-status="done"]');
}

/** A workflow of `n` nodes: an input, agents in parallel chains of `depth`, each chain into one output. */
function bigWorkflow(n = 200, depth = 11) {
  const nodes = [{ id: 'in', kind: 'input', config: { schema: { type: 'object', properties: { text: { type: 'string' } } } } }];
  const edges = [];
  let i = 0;
  while (nodes.length < n - 1) {
    let prev = 'in';
    for (let d = 0; d < depth && nodes.length < n - 1; d += 1) {
      const id = `a${i}_${d}`;
      nodes.push({ id, kind: 'agent', config: { prompt: `Step ${d} of ${prev === 'in' ? '{{ in.text }}' : `{{ ${prev}.output }}`}` } });
      edges.push({ source: prev, target: id });
      prev = id;
    }
    i += 1;
  }
  const last = nodes.filter((x) => x.kind === 'agent' && !edges.some((e) => e.source === x.id));
  nodes.push({ id: 'out', kind: 'output', config: { value: last.map((x) => `{{ ${x.id}.output }}`).join('\n') } });
  for (const x of last) edges.push({ source: x.id, target: 'out' });
  return { version: '1', nodes, edges };
}

/** Frames per second while `action` runs, counted with requestAnimationFrame in the page. */
async function fps(page, action) {
  await page.evaluate(() => {
    window.frames_ = 0;
    window.counting = true;
    const tick = () => { if (!window.counting) return; window.frames_ += 1; requestAnimationFrame(tick); };
    window.started_ = performance.now();
    requestAnimationFrame(tick);
  });
  await action();
  return page.evaluate(() => { window.counting = false; return { frames: window.frames_, seconds: (performance.now() - window.started_) / 1000 }; });
}

export async function editor_perf({ page }) {
  await login(page);
  await openEditor(page);
  const dir = mkdtempSync(join(tmpdir(), 'agentix-perf-'));
  const file = join(dir, 'big.json');
  const big = bigWorkflow();
  writeFileSync(file, JSON.stringify(big));
  await importFile(page, file);
  await page.waitForFunction(() => document.querySelectorAll('.react-flow__node').length > 20, null, LONG);
  await noProblems(page);
  check(await page.locator('[data-testid="problems"]').getAttribute('data-count') === '0', 'the 200-node workflow is valid');
  const box = await page.locator('.canvas .react-flow').boundingBox();
  // Drag one node across the canvas in small steps, as a hand would.
  const node = page.locator('.react-flow__node').nth(5);
  const nb = await node.boundingBox();
  const drag = await fps(page, async () => {
    await page.mouse.move(nb.x + nb.width / 2, nb.y + 6);
    await page.mouse.down();
    for (let s = 1; s <= 90; s += 1) await page.mouse.move(nb.x + nb.width / 2 + s * 3, nb.y + 6 + Math.sin(s / 9) * 60);
    await page.mouse.up();
  });
  // Pan the whole canvas by dragging its background.
  const pan = await fps(page, async () => {
    await page.mouse.move(box.x + box.width - 30, box.y + 30);
    await page.mouse.down();
    for (let s = 1; s <= 90; s += 1) await page.mouse.move(box.x + box.width - 30 - s * 4, box.y + 30 + s * 2);
    await page.mouse.up();
  });
  // Validation round trips: change a prompt (through the JSON of a pasted edit is not needed: the form).
  const trips = [];
  await page.locator('.react-flow__controls-fitview').click();
  await page.locator('.react-flow__node[data-id="a0_1"]').click({ position: { x: 20, y: 8 } });
  const prompt = page.getByLabel('Prompt', { exact: true });
  for (let k = 0; k < 5; k += 1) {
    await prompt.fill(`Step again ${k}: {{ in.text }}`);
    await page.waitForSelector('[data-testid="problems"][data-pending="false"]', LONG);
    await page.waitForFunction(() => !document.querySelector('[data-testid="problems"][data-pending="true"]'));
    trips.push(Number(await page.getAttribute('[data-testid="problems"]', 'data-validation-ms')));
    await page.waitForTimeout(50); // let the next edit be a change of its own
  }
  const result = {
    nodes: big.nodes.length, edges: big.edges.length,
    drag_fps: Math.round((drag.frames / drag.seconds) * 10) / 10, drag_seconds: drag.seconds,
    pan_fps: Math.round((pan.frames / pan.seconds) * 10) / 10, pan_seconds: pan.seconds,
    validation_ms: trips.map((t) => Math.round(t)), validation_median_ms: [...trips].sort((a, b) => a - b)[Math.floor(trips.length / 2)],
  };
  check(drag.frames > 0 && pan.frames > 0 && trips.every((t) => t > 0), `measured: ${JSON.stringify(result)}`);
  const out = join(dirname(env.shots), 'console-perf.json');
  mkdirSync(dirname(out), { recursive: true });
  writeFileSync(out, `${JSON.stringify(result, null, 2)}\n`);
  console.log(`perf ${JSON.stringify(result)}`);
  await shot(page, 'canvas-06-200-nodes', { fullPage: false });
}
