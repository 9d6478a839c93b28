// The chat page: conversations on the side, the thread, the composer. A posted message becomes a
// run whose answer streams from GET /runs/{id}/events; when the run is done its stored messages
// replace the streamed preview (the message table is the truth). A reload re-attaches to every
// run not ended yet (GET /conversations/{id}/runs) and replays its stream from the start, so the
// same answer finishes.

import { api, session } from '../api.js';
import { h, clear, busy, errorBox, field, select, toast } from '../ui.js';
import { followStream } from '../sse.js';
import { initialAnswer, applyRunEvent } from '../chatstate.js';
import { messageView, liveView } from '../chatparts.js';
import { conversationList } from '../chatlist.js';

const enc = encodeURIComponent;
const MODES = [['react', 'ReAct (tools)'], ['direct', 'Direct'], ['plan', 'Plan, then approve']];
const QUIET_MS = 8000; // no event for this long: say the model is quiet (the run is still alive)
// Waiting for the recorder to record a run's end: first soon, then backing off (it can lag by
// seconds on a busy gateway, and every poll counts against the user's rate limit).
const ENDED_POLL_MS = 150;
const ENDED_POLL_MAX_MS = 2000;
const ENDED_POLL_TRIES = 60;

/** The models a user may pick: the chain's (admins can read it) and the offline model. */
async function modelChoices() {
  const names = new Set();
  if (session.user && session.user.admin) {
    try {
      const chain = await api('/admin/models/chain');
      for (const n of [chain.active, ...(chain.fallbacks || [])]) if (n) names.add(n);
      const models = await api('/admin/models', { query: { limit: 200 } });
      for (const m of models.items || []) if (m.enabled !== false) names.add(m.name);
    } catch { /* not allowed or down: the default chain only */ }
  }
  names.add('offline');
  return [...names].sort();
}

async function allMessages(conversationId) {
  const out = [];
  let cursor = null;
  do {
    const page = await api(`/conversations/${enc(conversationId)}/messages`, { query: { limit: 200, cursor } });
    out.push(...(page.items || []));
    cursor = page.next_cursor;
  } while (cursor);
  return out;
}

export default {
  title: 'Chat',
  async render(main, { id }) {
    let conversation = null;
    let messages = [];
    let pickedMode = 'react';
    let pickedModel = '';
    let generation = 0; // bumps when another conversation opens: late answers for the old one are dropped
    const live = new Map(); // run id → {answer, el, stream, quiet, timer, frame, toggled}: the runs followed

    const problem = h('div');
    const heading = h('h1', { 'data-testid': 'chat-title' }, 'New conversation');
    const modeSel = select(MODES, pickedMode, { name: 'mode', 'data-testid': 'mode' });
    const modelSel = select([['', 'Default (the failover chain)']], '', { name: 'model', 'data-testid': 'model' });
    const thread = h('div', { class: 'chat-thread', 'data-testid': 'thread', tabindex: 0, 'aria-label': 'Conversation thread' });
    const text = h('textarea', { name: 'text', rows: 3, 'aria-label': 'Message', placeholder: 'Write a message… (Ctrl+Enter sends)', maxlength: 100000 });
    const sendBtn = h('button', { type: 'submit', class: 'primary', 'data-action': 'send' }, 'Send');
    const stopBtn = h('button', { type: 'button', class: 'danger', 'data-action': 'stop', disabled: true }, 'Stop');
    const composer = h('form', { class: 'chat-composer', 'data-testid': 'composer' }, text, h('div', { class: 'actions' }, sendBtn, stopBtn));
    const list = conversationList({
      onOpen: (c) => open(c.id, true),
      onChanged: (c) => { if (conversation && c.id === conversation.id) { conversation = c; heading.textContent = c.title; } },
      onDeleted: (deletedId) => { if (conversation && deletedId === conversation.id) reset(); },
    });
    const newBtn = h('button', { type: 'button', 'data-action': 'new-conversation' }, 'New conversation');
    newBtn.addEventListener('click', () => reset());

    main.append(h('div', { class: 'chat-layout' },
      h('aside', { class: 'panel chat-side', 'aria-labelledby': 'chat-list-title' },
        h('div', { class: 'page-head' }, h('h2', { id: 'chat-list-title' }, 'Conversations'), newBtn), list.el),
      h('section', { class: 'chat-main' },
        h('div', { class: 'page-head' }, heading,
          h('div', { class: 'toolbar' }, field('Mode', modeSel), field('Model', modelSel))),
        problem, thread, composer)));

    // ---------------------------------------------------------------- the thread

    function drawThread() {
      const atBottom = thread.scrollHeight - thread.scrollTop - thread.clientHeight < 40;
      const nodes = [];
      const placed = new Set();
      messages.forEach((m, i) => {
        nodes.push(messageView(m));
        const next = messages[i + 1];
        // A run's live answer goes after its messages (after its user message while it runs).
        if (m.run_id && live.has(m.run_id) && (!next || next.run_id !== m.run_id)) {
          nodes.push(live.get(m.run_id).el);
          placed.add(m.run_id);
        }
      });
      for (const [runId, entry] of live) if (!placed.has(runId)) nodes.push(entry.el);
      if (!nodes.length) nodes.push(h('p', { class: 'muted chat-hint' }, 'Ask anything. The answer streams here; tools and plans show as steps.'));
      clear(thread, nodes);
      if (atBottom) thread.scrollTop = thread.scrollHeight;
      drawStop();
    }

    function drawLive(entry) {
      if (entry.frame !== null) return;
      entry.frame = requestAnimationFrame(() => {
        entry.frame = null;
        const atBottom = thread.scrollHeight - thread.scrollTop - thread.clientHeight < 40;
        clear(entry.el, liveView(entry.answer, { decide: (d, b) => decide(entry, d, b), quiet: entry.quiet }));
        // A step the reader opened or closed stays so while the answer goes on redrawing.
        for (const d of entry.el.querySelectorAll('details[data-key]')) {
          if (entry.toggled.has(d.dataset.key)) d.open = entry.toggled.get(d.dataset.key);
        }
        if (atBottom) thread.scrollTop = thread.scrollHeight;
        drawStop();
      });
    }

    /** The run Stop ends: the one answering now (the oldest not ended). */
    function activeRun() {
      for (const [runId, entry] of live) if (!entry.answer.finished) return runId;
      return null;
    }

    function drawStop() {
      stopBtn.disabled = activeRun() === null;
    }

    // ---------------------------------------------------------------- runs

    function follow(runId) {
      if (live.has(runId)) return;
      const entry = {
        answer: initialAnswer(runId), el: h('div', { class: 'chat-live-wrap' }), stream: null, quiet: false, timer: null, frame: null, toggled: new Map(),
      };
      entry.el.addEventListener('click', (ev) => {
        const details = ev.target.closest('summary') && ev.target.closest('details[data-key]');
        if (details) entry.toggled.set(details.dataset.key, !details.open); // the state it is about to take
      });
      live.set(runId, entry);
      const mine = generation;
      const hush = () => {
        clearTimeout(entry.timer);
        entry.quiet = false;
        entry.timer = setTimeout(() => { entry.quiet = true; drawLive(entry); }, QUIET_MS);
      };
      hush();
      entry.stream = followStream(`/runs/${enc(runId)}/events`, {
        onEvent(msg) {
          if (!applyRunEvent(entry.answer, msg)) return;
          if (msg.event === 'heartbeat') entry.quiet = true;
          else hush();
          drawLive(entry);
        },
        onState(state, info) {
          if (state === 'error') { clear(problem, errorBox(info.error)); stopFollowing(runId); drawThread(); }
          if (state === 'ended' && mine === generation) settle(runId, mine);
        },
      });
      drawLive(entry);
    }

    function stopFollowing(runId) {
      const entry = live.get(runId);
      if (!entry) return;
      entry.stream.close();
      clearTimeout(entry.timer);
      if (entry.frame !== null) cancelAnimationFrame(entry.frame);
      live.delete(runId);
    }

    /** The run is done: once its end is recorded, its stored messages replace the preview. */
    async function settle(runId, mine) {
      clearTimeout(live.get(runId)?.timer);
      try {
        for (let i = 0; i < ENDED_POLL_TRIES; i += 1) {
          const run = await api(`/runs/${enc(runId)}`);
          if (run.ended_at) break;
          await new Promise((r) => setTimeout(r, Math.min(ENDED_POLL_MS * 2 ** i, ENDED_POLL_MAX_MS)));
        }
        if (mine !== generation) return;
        messages = await allMessages(conversation.id);
      } catch (err) {
        if (mine === generation) clear(problem, errorBox(err));
      }
      if (mine !== generation) return;
      stopFollowing(runId);
      drawThread();
      list.load();
    }

    function decide(entry, decision, button) {
      busy(button, async () => {
        await api(`/runs/${enc(entry.answer.runId)}/approval`, { method: 'POST', body: { decision } });
        toast(decision === 'approve' ? 'Approved: the run goes on.' : 'Rejected.', 'ok');
      });
    }

    stopBtn.addEventListener('click', () => busy(stopBtn, async () => {
      const runId = activeRun();
      if (!runId) return;
      await api(`/runs/${enc(runId)}/cancel`, { method: 'POST' });
      toast('Stopping: what was written so far is kept.');
    }));

    // ---------------------------------------------------------------- conversations

    function closeAll() {
      generation += 1;
      for (const runId of [...live.keys()]) stopFollowing(runId);
    }

    function reset() {
      closeAll();
      conversation = null;
      messages = [];
      heading.textContent = 'New conversation';
      history.replaceState(null, '', '/console/chat');
      list.setCurrent(null);
      clear(problem);
      drawThread();
      text.focus();
    }

    async function open(conversationId, push = false) {
      closeAll();
      const mine = generation;
      clear(problem);
      if (push) history.pushState(null, '', `/console/chat/${enc(conversationId)}`);
      list.setCurrent(conversationId);
      try {
        const [c, msgs, going] = await Promise.all([
          api(`/conversations/${enc(conversationId)}`),
          allMessages(conversationId),
          api(`/conversations/${enc(conversationId)}/runs`),
        ]);
        if (mine !== generation) return;
        conversation = c;
        messages = msgs;
        heading.textContent = c.title;
        document.title = `${c.title} · Chat · Agentix`;
        pickedMode = c.mode;
        modeSel.value = c.mode;
        pickedModel = c.model || '';
        ensureModelOption(pickedModel);
        modelSel.value = pickedModel;
        for (const run of going.items || []) follow(run.id); // a reload re-attaches here
        drawThread();
      } catch (err) {
        clear(problem, errorBox(err));
      }
    }

    function ensureModelOption(name) {
      if (name && ![...modelSel.options].some((o) => o.value === name)) modelSel.append(h('option', { value: name }, name));
    }

    async function changeConversation(body) {
      if (!conversation) return;
      try {
        conversation = await api(`/conversations/${enc(conversation.id)}`, { method: 'PATCH', body });
      } catch (err) { toast(err.message, 'error'); }
    }
    modeSel.addEventListener('change', () => { pickedMode = modeSel.value; changeConversation({ mode: pickedMode }); });
    modelSel.addEventListener('change', () => { pickedModel = modelSel.value; changeConversation({ model: pickedModel }); });

    async function send() {
      const said = text.value.trim();
      if (!said) return;
      clear(problem);
      if (!conversation) {
        const title = said.length > 60 ? `${said.slice(0, 57)}…` : said;
        conversation = await api('/conversations', { method: 'POST', body: { title, mode: pickedMode, model: pickedModel || undefined } });
        heading.textContent = conversation.title;
        history.replaceState(null, '', `/console/chat/${enc(conversation.id)}`);
        list.setCurrent(conversation.id);
      }
      const accepted = await api(`/conversations/${enc(conversation.id)}/messages`, { method: 'POST', body: { text: said } });
      text.value = '';
      messages.push(accepted.message);
      follow(accepted.run.id);
      if (accepted.run.position) applyRunEvent(live.get(accepted.run.id).answer, { id: null, event: 'queued', data: { position: accepted.run.position } });
      drawThread();
      list.load();
    }

    composer.addEventListener('submit', (ev) => {
      ev.preventDefault();
      if (sendBtn.disabled) return; // Ctrl+Enter while the last message is still being posted
      busy(sendBtn, async () => {
        try { await send(); } catch (err) { clear(problem, errorBox(err)); }
      });
    });
    text.addEventListener('keydown', (ev) => {
      if (ev.key === 'Enter' && (ev.ctrlKey || ev.metaKey)) { ev.preventDefault(); composer.requestSubmit(); }
    });

    const loadModels = modelChoices().then((names) => {
      for (const n of names) ensureModelOption(n);
      modelSel.value = pickedModel;
    });
    await Promise.all([list.load(), loadModels]);
    if (id) await open(decodeURIComponent(id));
    else drawThread();

    return () => closeAll(); // leaving the page (the router re-renders on back/forward too)
  },
};
