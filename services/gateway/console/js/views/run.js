// The run viewer: the graph coloured live from the task's event stream, the selected node's
// tokens, tool calls, branch decisions, evaluations and usage; approve/reject, cancel, retry.
// The folded state is kept in sessionStorage with its last event id, so a reload resumes with
// ?after=<id> and the text continues without a gap or a duplicate.

import { api } from '../api.js';
import { h, clear, badge, busy, empty, errorBox, fmtCost, fmtJson, fmtMs, fmtNum, fmtTime, durationOf, toast } from '../ui.js';
import { drawDag, STATUS_MARK } from '../dag.js';
import { followStream } from '../sse.js';
import { initialState, applyEvent, loadState, saveState } from '../runstate.js';
import { DSL_CACHE } from './submit.js';

const TERMINAL = new Set(['done', 'failed', 'timeout', 'rejected', 'cancelled', 'budget_exceeded']);
const SAVE_EVERY_MS = 250;
const MODEL_KINDS = new Set(['agent', 'dual', 'coordinator', 'map']);

async function graphOf(task) {
  if (task.dsl && Array.isArray(task.dsl.nodes)) return { dsl: task.dsl, exact: true };
  try {
    const cached = JSON.parse(sessionStorage.getItem(DSL_CACHE + task.id) || 'null');
    if (cached && Array.isArray(cached.nodes)) return { dsl: cached, exact: true };
  } catch { /* fall through */ }
  if (task.workflow_id) {
    try {
      const wf = await api(`/workflows/${encodeURIComponent(task.workflow_id)}`);
      if (wf.dsl) return { dsl: wf.dsl, exact: false };
    } catch { /* deleted workflow: fall through */ }
  }
  // Last resort: the nodes the task record lists, without edges.
  return { dsl: { version: '1', nodes: (task.nodes || []).map((n) => ({ id: n.id, kind: n.kind || '?' })), edges: [] }, exact: false };
}

function configSummary(node) {
  if (!node || !node.config) return null;
  const c = node.config;
  const main = c.prompt ?? c.value ?? c.condition ?? c.message ?? c.goal ?? c.query ?? (c.tool ? `${c.tool}(${JSON.stringify(c.args || {})})` : null);
  return h('details', {}, h('summary', {}, 'Configuration'), h('pre', { class: 'small' }, main !== null && main !== undefined ? String(main) : fmtJson(c)));
}

function toolCall(t) {
  return h('div', { class: 'call', 'data-call': t.call_id },
    h('div', {}, h('strong', {}, h('code', {}, t.tool)), ' ',
      t.result === undefined && t.ok === undefined ? badge('running', 'running') : badge(t.ok ? 'ok' : 'error', t.ok ? 'ok' : 'error'),
      t.duration_ms !== undefined ? h('span', { class: 'muted small' }, ` ${fmtMs(t.duration_ms)}`) : null),
    h('div', { class: 'small muted' }, 'arguments'), h('pre', {}, fmtJson(t.args ?? {})),
    t.ok === false ? [h('div', { class: 'small muted' }, 'error'), h('pre', {}, fmtJson(t.error ?? ''))]
      : t.result !== undefined ? [h('div', { class: 'small muted' }, 'result'), h('pre', {}, fmtJson(t.result))] : null);
}

export default {
  title: 'Run',
  async render(main, { id }) {
    const taskId = decodeURIComponent(id);
    let state = loadState(taskId) || initialState(taskId);
    let task = null;
    let stream = null;
    let dag = null;
    let dslNodes = new Map();
    let selected = null;
    let userSelected = false;
    let saveTimer = null;
    let frame = null;
    let approvalFor = null;

    const root = h('div', { class: 'run', 'data-task': taskId });
    const problem = h('div');
    const statusEl = h('span', { 'data-testid': 'run-status' });
    const connEl = h('span', { class: 'conn muted', 'aria-live': 'polite', 'data-testid': 'conn' });
    const metaEl = h('div', { class: 'meta' });
    const actionsEl = h('div', { class: 'actions' });
    const approvalEl = h('div', { 'data-testid': 'approval' });
    const graphEl = h('div', { class: 'graph-box', 'data-testid': 'graph' }, h('p', { class: 'muted' }, 'Loading…'));
    const graphNote = h('div');
    const nodeEl = h('section', { class: 'panel', 'aria-live': 'off', 'data-testid': 'node-panel' });
    const tokensEl = h('pre', { class: 'tokens', 'data-testid': 'tokens', tabindex: 0, 'aria-label': 'Token stream of the selected node' });
    const nodeDetail = h('div');
    const outputEl = h('section', { class: 'panel', 'data-testid': 'output' });
    const logList = h('ol');
    const logEl = h('div', { class: 'log', tabindex: 0, 'aria-label': 'Event log' }, logList);
    let logCount = 0;

    main.append(root);
    clear(root,
      h('div', { class: 'page-head run-head' },
        h('h1', {}, 'Run ', h('code', {}, taskId)), statusEl, connEl, actionsEl),
      metaEl, problem, approvalEl,
      h('section', { class: 'panel', 'aria-labelledby': 'run-graph' },
        h('h2', { id: 'run-graph' }, 'Graph'), graphEl, graphNote,
        h('div', { class: 'legend', 'aria-hidden': 'true' }, Object.entries(STATUS_MARK).map(([s, m]) => h('span', {}, `${m} ${s}`)))),
      h('div', { class: 'run-body' },
        nodeEl,
        h('div', {}, outputEl, h('section', { class: 'panel', 'aria-labelledby': 'run-log' }, h('h2', { id: 'run-log' }, 'Events'), logEl))));

    // ---------------------------------------------------------------- persistence

    function persistSoon() {
      if (saveTimer) return;
      saveTimer = setTimeout(() => { saveTimer = null; saveState(state); }, SAVE_EVERY_MS);
    }
    const persistNow = () => { clearTimeout(saveTimer); saveTimer = null; saveState(state); };
    window.addEventListener('pagehide', persistNow);

    // ---------------------------------------------------------------- rendering

    function renderSoon() {
      if (frame === null) frame = requestAnimationFrame(() => { frame = null; render(); });
    }

    function autoSelect() {
      if (userSelected) return;
      const nodes = Object.values(state.nodes).filter((n) => dslNodes.has(n.id));
      const pick = state.waitingNode
        || nodes.filter((n) => n.status === 'running' && n.text).map((n) => n.id).pop()
        || nodes.filter((n) => n.text).map((n) => n.id).pop()
        || nodes.filter((n) => n.status === 'running').map((n) => n.id).pop();
      if (pick && pick !== selected) select(pick, false);
    }

    function select(nodeId, byUser = true) {
      const changed = nodeId !== selected;
      selected = nodeId;
      if (byUser) userSelected = true;
      if (dag) dag.select(nodeId);
      if (changed) tokensEl.scrollTop = 0;
      renderNode();
    }

    function render() {
      root.dataset.lastId = state.lastId ?? '';
      root.dataset.duplicates = String(state.duplicates);
      root.dataset.gaps = String(state.gaps);
      root.dataset.finished = String(state.finished);
      clear(statusEl, badge(state.status));
      if (dag) {
        for (const [nid] of dslNodes) dag.setStatus(nid, state.nodes[nid] ? state.nodes[nid].status : 'pending');
      }
      autoSelect();
      renderMeta();
      renderActions();
      renderApproval();
      renderNode();
      renderOutput();
      renderLog();
    }

    function renderMeta() {
      const usage = state.usage || task?.usage || {};
      const started = task?.started_at;
      const finished = task?.finished_at;
      clear(metaEl,
        h('span', {}, 'created ', fmtTime(task?.created_at)),
        started ? h('span', {}, 'ran ', fmtMs(durationOf(started, state.finished ? finished : null))) : null,
        h('span', { 'data-testid': 'usage' }, `${fmtNum(usage.prompt_tokens ?? 0)} prompt + ${fmtNum(usage.completion_tokens ?? 0)} completion tokens · ${fmtCost(usage.cost ?? 0)}`),
        state.budget ? h('span', {}, `budget ${fmtNum(state.budget.used)} / ${fmtNum(state.budget.limit)}`) : null,
        state.chainRevision !== null ? h('span', {}, `model chain revision ${state.chainRevision}`) : null,
        state.gaps ? h('span', { class: 'badge badge-warn' }, `${state.gaps} events missing (trimmed by retention)`) : null,
        state.status === 'submitted' && !state.log.length ? h('span', { class: 'badge badge-waiting' }, 'queued: waiting for a dispatcher') : null);
    }

    function renderActions() {
      const terminal = TERMINAL.has(state.status) && state.finished;
      const cancel = h('button', { type: 'button', class: 'danger', disabled: terminal, 'data-action': 'cancel' }, 'Cancel');
      cancel.addEventListener('click', () => busy(cancel, async () => {
        await api(`/tasks/${encodeURIComponent(taskId)}/cancel`, { method: 'POST' });
        toast('Cancellation requested.');
      }));
      const retryable = ['failed', 'timeout'].includes(state.status);
      const retry = h('button', { type: 'button', disabled: !retryable, 'data-action': 'retry', title: retryable ? 'Run the failed part again' : 'Only a failed or timed-out run can be retried' }, 'Retry');
      retry.addEventListener('click', () => busy(retry, async () => {
        await api(`/tasks/${encodeURIComponent(taskId)}/retry`, { method: 'POST' });
        toast('Retry submitted.');
        state.finished = false;
        follow();
      }));
      if (actionsEl.dataset.sig === `${terminal}${retryable}`) return; // keep focus on the buttons
      actionsEl.dataset.sig = `${terminal}${retryable}`;
      clear(actionsEl, cancel, retry, h('a', { class: 'button', href: '/console/runs/new' }, 'New run'));
    }

    function renderApproval() {
      const nid = state.waitingNode;
      if (nid === approvalFor) return; // built once per waiting node, so typing is never lost
      approvalFor = nid;
      if (!nid) { clear(approvalEl); return; }
      const n = state.nodes[nid] || {};
      const comment = h('textarea', { rows: 2, id: 'approval-comment', style: 'font-family: inherit' });
      const message = h('div', { 'aria-live': 'polite' });
      const decide = (decision, button) => busy(button, async () => {
        try {
          await api(`/tasks/${encodeURIComponent(taskId)}/approval`, { method: 'POST', body: { decision, comment: comment.value || null, node_id: nid } });
          clear(message, h('div', { class: 'notice ok' }, `${decision === 'approve' ? 'Approved' : 'Rejected'}; the run continues.`));
        } catch (err) { clear(message, errorBox(err)); }
      });
      const approve = h('button', { type: 'button', class: 'ok solid', 'data-action': 'approve' }, 'Approve');
      const reject = h('button', { type: 'button', class: 'danger solid', 'data-action': 'reject' }, 'Reject');
      approve.addEventListener('click', () => decide('approve', approve));
      reject.addEventListener('click', () => decide('reject', reject));
      clear(approvalEl, h('section', { class: 'approval-box', 'aria-labelledby': 'approval-title' },
        h('h2', { id: 'approval-title' }, `Approval needed at `, h('code', {}, nid)),
        h('pre', {}, n.approval?.message || '(no message)'),
        h('div', { class: 'field' }, h('label', { for: 'approval-comment' }, 'Comment (optional)'), comment),
        h('div', { class: 'actions' }, approve, reject), message));
    }

    function renderNode() {
      if (!selected) {
        clear(nodeEl, h('h2', {}, 'Node'), empty('Select a node in the graph (click, or Tab and Enter) to see its tokens, tool calls and result.'));
        nodeEl.dataset.sig = '';
        return;
      }
      const n = state.nodes[selected] || { status: 'pending', text: '', thinking: '', tools: [], evals: [], guardrails: [], experts: [] };
      const def = dslNodes.get(selected);
      const subs = Object.values(state.nodes).filter((s) => s.id !== selected && (s.id.startsWith(`${selected}[`) || s.id.startsWith(`${selected}.`) || s.id.startsWith(`${selected}/`)));
      // Keep the token box itself (and its scroll position): only its text changes.
      const atBottom = tokensEl.scrollHeight - tokensEl.scrollTop - tokensEl.clientHeight < 24;
      tokensEl.dataset.node = selected;
      tokensEl.textContent = n.text || '';
      if (n.status === 'running') tokensEl.append(h('span', { class: 'cursor', 'aria-hidden': 'true' }, ' '));
      if (!n.text && n.status !== 'running') tokensEl.append(h('span', { class: 'muted' }, n.status === 'pending' ? '(not started)' : '(no tokens)'));
      if (atBottom) tokensEl.scrollTop = tokensEl.scrollHeight;

      // Rebuild the details only when they changed (not on every token): focus stays put.
      const detailSig = JSON.stringify([selected, { ...n, text: undefined }, subs.map((x) => [x.id, x.status, x.text.length])]);
      if (nodeDetail.dataset.sig !== detailSig) {
        nodeDetail.dataset.sig = detailSig;
        clear(nodeDetail,
          n.thinking ? h('details', {}, h('summary', {}, 'Thinking'), h('pre', { class: 'tokens thinking' }, n.thinking)) : null,
          n.branch ? h('p', { 'data-testid': 'branch' }, 'Branch decision: ', badge(n.branch, 'canary')) : null,
          n.approval ? h('div', {}, h('h3', {}, 'Approval'), h('pre', {}, n.approval.message || ''),
            n.approval.decision ? h('p', {}, badge(n.approval.decision, n.approval.decision === 'approve' ? 'ok' : 'error'), ` by ${n.approval.by}`, n.approval.comment ? ` — “${n.approval.comment}”` : '') : null) : null,
          n.tools.length ? [h('h3', {}, `Tool calls (${n.tools.length})`), n.tools.map(toolCall)] : null,
          n.evals.length ? [h('h3', {}, 'Evaluation'), h('ul', {}, n.evals.map((e) => h('li', {},
            `score ${e.score} `, badge(e.grade, e.grade), e.regenerated ? ' regenerated' : '', e.reasons.length ? ` — ${e.reasons.join('; ')}` : '')))] : null,
          n.experts.length ? [h('h3', {}, 'Experts'), h('ul', {}, n.experts.map((e) => h('li', {}, h('strong', {}, e.name), ' ', badge(e.status), h('div', { class: 'small muted' }, e.brief))))] : null,
          n.guardrails.length ? [h('h3', {}, 'Guardrails'), h('ul', {}, n.guardrails.map((g) => h('li', {}, `tier ${g.tier} `, badge(g.action, g.action), ` ${g.reason}`)))] : null,
          subs.length ? [h('h3', {}, 'Items'), subs.map((s) => h('details', {}, h('summary', {}, h('code', {}, s.id), ' ', badge(s.status)), h('pre', { class: 'small' }, s.text || s.outputPreview || s.error || '')))] : null,
          n.error ? errorBox(new Error(n.error)) : null,
          n.outputPreview ? [h('h3', {}, 'Output'), h('pre', { class: 'small', 'data-testid': 'node-output' }, n.outputPreview)] : null,
          n.usage ? h('p', { class: 'small muted' }, `usage: ${fmtNum(n.usage.prompt_tokens)} prompt + ${fmtNum(n.usage.completion_tokens)} completion tokens${n.usage.models?.length ? ` on ${n.usage.models.join(', ')}` : ''}`) : null,
          configSummary(def));
      }

      // Only model-driven nodes stream tokens; for the others the box would only say "none".
      const streams = Boolean(n.text) || MODEL_KINDS.has(n.kind || def?.kind);
      const sig = `${selected}|${n.status}|${streams}`;
      if (!nodeEl.contains(nodeDetail) || nodeEl.dataset.sig !== sig) {
        nodeEl.dataset.sig = sig;
        nodeEl.dataset.node = selected;
        clear(nodeEl,
          h('h2', {}, 'Node ', h('code', {}, selected), ' ', h('span', { class: 'muted small' }, n.kind || def?.kind || ''), ' ', badge(n.status)),
          n.durationMs !== null && n.durationMs !== undefined ? h('p', { class: 'small muted' }, `took ${fmtMs(n.durationMs)}`) : null,
          streams ? [h('h3', {}, 'Tokens'), tokensEl] : null, nodeDetail);
      }
    }

    function renderOutput() {
      const hasOutput = state.output !== undefined && state.output !== null;
      const sig = `${state.finished}|${hasOutput}|${state.errors.length}|${state.error}`;
      if (outputEl.dataset.sig === sig) return;
      outputEl.dataset.sig = sig;
      clear(outputEl, h('h2', {}, 'Result'),
        state.error ? errorBox(new Error(state.error)) : null,
        state.errors.length ? h('ul', {}, state.errors.map((e) => h('li', {}, h('code', {}, e.code), e.node_id ? ` at ${e.node_id}` : '', `: ${e.message}`))) : null,
        hasOutput ? h('pre', { class: 'tokens', 'data-testid': 'final-output', tabindex: 0 }, fmtJson(state.output))
          : empty(state.finished ? 'The run ended without an output.' : 'The output appears when the run finishes.'));
    }

    function renderLog() {
      // Append only what is new (the log is bounded in state; a reset redraws it).
      if (logCount > state.log.length) { clear(logList); logCount = 0; }
      const atBottom = logEl.scrollHeight - logEl.scrollTop - logEl.clientHeight < 24;
      if (logCount === 0 && state.log.length) clear(logList); // drop the "no event" line
      for (const e of state.log.slice(logCount)) {
        logList.append(h('li', {}, h('span', { class: 'id' }, e.id), h('span', { class: 'node' }, e.node || ''), h('span', {}, e.type === 'status' || e.type === 'done' ? h('strong', {}, e.text) : e.text)));
      }
      logCount = state.log.length;
      if (!logCount) clear(logList, h('li', { class: 'muted' }, 'No event yet.'));
      if (atBottom) logEl.scrollTop = logEl.scrollHeight;
    }

    // ---------------------------------------------------------------- the stream

    function follow() {
      if (stream) stream.close();
      stream = followStream(`/tasks/${encodeURIComponent(taskId)}/events`, {
        after: state.lastId,
        onEvent(msg) {
          if (applyEvent(state, msg)) { persistSoon(); renderSoon(); }
        },
        async onState(s, info) {
          const text = {
            connecting: 'connecting…', open: 'live', reconnecting: `reconnecting${info.attempt ? ` (attempt ${info.attempt})` : ''}…`, ended: 'stream ended',
          }[s] || s;
          clear(connEl, s === 'open' ? h('span', { class: 'badge badge-running' }, '● live') : text);
          connEl.dataset.state = s;
          if (s === 'error') clear(problem, errorBox(info.error));
          if (s === 'ended') {
            persistNow();
            await refreshTask();
          }
        },
      });
    }

    async function refreshTask() {
      try {
        task = await api(`/tasks/${encodeURIComponent(taskId)}`);
        renderSoon();
      } catch (err) {
        clear(problem, errorBox(err));
      }
    }

    try {
      task = await api(`/tasks/${encodeURIComponent(taskId)}`);
    } catch (err) {
      clear(root, h('h1', {}, 'Run ', h('code', {}, taskId)), errorBox(err), h('a', { href: '/console/runs' }, 'All runs'));
      return () => {};
    }
    document.title = `Run ${taskId} · Agentix`;
    const { dsl, exact } = await graphOf(task);
    dslNodes = new Map((dsl.nodes || []).map((n) => [n.id, n]));
    dag = drawDag(dsl, { onSelect: (nid) => select(nid), label: `Graph of run ${taskId}` });
    clear(graphEl, dag.svg);
    if (!exact) {
      clear(graphNote, h('p', { class: 'muted small' }, dsl.edges.length
        ? 'Graph drawn from the saved workflow (it may have changed since this run).'
        : 'This run’s workflow was not available to the console: nodes are shown without their edges.'));
    }
    // Retried since this state was saved (here or elsewhere): follow the reopened run.
    if (state.finished && (task.retry || 0) > (state.retry || 0)) state.finished = false;
    render();
    if (!state.finished) follow();
    else clear(connEl, 'finished');

    return () => {
      if (stream) stream.close();
      persistNow();
      window.removeEventListener('pagehide', persistNow);
      if (frame !== null) cancelAnimationFrame(frame);
    };
  },
};
