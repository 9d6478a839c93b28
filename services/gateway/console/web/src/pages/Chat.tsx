// The chat page: conversations on the side, the thread, the composer. A posted message becomes a
// run whose answer streams from GET /runs/{id}/events; when the run is done its stored messages
// replace the streamed preview (the message table is the truth). A reload re-attaches to every
// run not ended yet (GET /conversations/{id}/runs) and replays its stream from the start, so the
// same answer finishes. Enter sends, Shift+Enter starts a new line.

import { useCallback, useEffect, useLayoutEffect, useReducer, useRef, useState } from 'react';
import { Link, useNavigate, useParams } from 'react-router-dom';
import { api, enc, session } from '../lib/api';
import { followStream, type Stream } from '../lib/sse';
import { applyRunEvent, initialAnswer, type Answer } from '../lib/chatstate';
import { Badge, BusyButton, Dialog, Empty, ErrorBox, Field, PageHead, Select, toast } from '../components/ui';
import { LiveView, MessageBox, MessageView } from '../components/ChatParts';

const MODES: [string, string][] = [['react', 'ReAct (tools)'], ['direct', 'Direct'], ['plan', 'Plan, then approve']];
const QUIET_MS = 8000; // no event for this long: say the model is quiet (the run is still alive)
// Waiting for the recorder to record a run's end: first soon, then backing off (it can lag by
// seconds on a busy gateway, and every poll counts against the user's rate limit).
const ENDED_POLL_MS = 150;
const ENDED_POLL_MAX_MS = 2000;
const ENDED_POLL_TRIES = 60;

/** The models a user may pick: the chain's (admins can read it) and the offline model. */
async function modelChoices(): Promise<string[]> {
  const names = new Set<string>();
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

async function allMessages(conversationId: string) {
  const out: any[] = [];
  let cursor: string | null = null;
  do {
    const page: any = await api(`/conversations/${enc(conversationId)}/messages`, { query: { limit: 200, cursor } });
    out.push(...(page.items || []));
    cursor = page.next_cursor;
  } while (cursor);
  return out;
}

interface Live { answer: Answer; stream: Stream | null; quiet: boolean; timer?: ReturnType<typeof setTimeout>; toggled: Map<string, boolean> }

function ConversationList({ items, current, onOpen, onPatch, onDelete }: {
  items: any[] | null; current: string | null; onOpen: (c: any) => void; onPatch: (c: any, body: any) => Promise<void>; onDelete: (c: any) => Promise<void>;
}) {
  const [renaming, setRenaming] = useState<any>(null);
  const [title, setTitle] = useState('');
  const [err, setErr] = useState<unknown>(null);
  return (
    <>
      <ul className="chat-list" data-testid="conversations">
        {items && !items.length ? <li><Empty message="No conversation yet. Write a message to start one." /></li> : null}
        {(items || []).map((c) => (
          <li key={c.id} className={c.id === current ? 'current' : undefined} data-testid="conversation" data-id={c.id} data-pinned={String(c.pinned)}>
            <Link to={`/chat/${enc(c.id)}`} className="chat-open" aria-current={c.id === current ? 'page' : undefined}
              onClick={(ev) => { if (ev.button !== 0 || ev.metaKey || ev.ctrlKey || ev.shiftKey || ev.altKey) return; ev.preventDefault(); onOpen(c); }}>
              {c.title}{c.pinned ? <> <Badge text="pinned" kind="canary" /></> : null}
            </Link>
            <div className="actions">
              <BusyButton className="small" data-action="pin" aria-label={`${c.pinned ? 'Unpin' : 'Pin'} ${c.title}`} action={() => onPatch(c, { pinned: !c.pinned })}>{c.pinned ? 'Unpin' : 'Pin'}</BusyButton>
              <button type="button" className="small" data-action="rename" aria-label={`Rename ${c.title}`} onClick={() => { setRenaming(c); setTitle(c.title); setErr(null); }}>Rename</button>
              <BusyButton className="small danger" data-action="delete" aria-label={`Delete ${c.title}`} action={async () => {
                if (!window.confirm(`Delete the conversation “${c.title}” with all its messages?`)) return;
                await onDelete(c);
              }}>Delete</BusyButton>
            </div>
          </li>
        ))}
      </ul>
      {renaming ? (
        <Dialog title={`Rename “${renaming.title}”`} onClose={() => setRenaming(null)}>
          <form onSubmit={async (ev) => {
            ev.preventDefault();
            try { await onPatch(renaming, { title: title.trim() }); setRenaming(null); } catch (e) { setErr(e); }
          }}>
            <Field label="Title"><input name="title" required maxLength={200} autoComplete="off" autoFocus value={title} onChange={(e) => setTitle(e.target.value)} /></Field>
            <ErrorBox error={err} />
            <div className="actions"><button type="submit" className="primary">Rename</button></div>
          </form>
        </Dialog>
      ) : null}
    </>
  );
}

export default function ChatPage() {
  const { id } = useParams();
  const navigate = useNavigate();
  const [conversation, setConversation] = useState<any>(null);
  const [messages, setMessages] = useState<any[]>([]);
  const [list, setList] = useState<any[] | null>(null);
  const [listProblem, setListProblem] = useState<unknown>(null);
  const [mode, setMode] = useState('react');
  const [model, setModel] = useState('');
  const [models, setModels] = useState<string[]>([]);
  const [text, setText] = useState('');
  const [sending, setSending] = useState(false);
  const [problem, setProblem] = useState<unknown>(null);
  const live = useRef(new Map<string, Live>()); // run id → the run followed
  const [, redraw] = useReducer((n: number) => n + 1, 0);
  const frame = useRef<number | null>(null);
  const generation = useRef(0); // bumps when another conversation opens: late answers for the old one are dropped
  const conversationRef = useRef<any>(null);
  conversationRef.current = conversation;
  const thread = useRef<HTMLDivElement>(null);
  const atBottom = useRef(true);

  const drawSoon = useCallback(() => {
    if (frame.current !== null) return;
    frame.current = requestAnimationFrame(() => { frame.current = null; redraw(); });
  }, []);

  const loadList = useCallback(async () => {
    try {
      const page = await api('/conversations', { query: { limit: 100 } });
      setList(page.items || []);
      setListProblem(null);
    } catch (err) { setListProblem(err); }
  }, []);

  const stopFollowing = useCallback((runId: string) => {
    const entry = live.current.get(runId);
    if (!entry) return;
    entry.stream?.close();
    clearTimeout(entry.timer);
    live.current.delete(runId);
  }, []);

  const closeAll = useCallback(() => {
    generation.current += 1;
    for (const runId of [...live.current.keys()]) stopFollowing(runId);
  }, [stopFollowing]);

  /** The run is done: once its end is recorded, its stored messages replace the preview. */
  const settle = useCallback(async (runId: string, mine: number) => {
    clearTimeout(live.current.get(runId)?.timer);
    try {
      for (let i = 0; i < ENDED_POLL_TRIES; i += 1) {
        const run = await api(`/runs/${enc(runId)}`);
        if (run.ended_at) break;
        await new Promise((r) => setTimeout(r, Math.min(ENDED_POLL_MS * 2 ** i, ENDED_POLL_MAX_MS)));
      }
      if (mine !== generation.current) return;
      setMessages(await allMessages(conversationRef.current.id));
    } catch (err) {
      if (mine === generation.current) setProblem(err);
    }
    if (mine !== generation.current) return;
    stopFollowing(runId);
    redraw();
    loadList();
  }, [loadList, stopFollowing]);

  const follow = useCallback((runId: string) => {
    if (live.current.has(runId)) return live.current.get(runId)!;
    const entry: Live = { answer: initialAnswer(runId), stream: null, quiet: false, toggled: new Map() };
    live.current.set(runId, entry);
    const mine = generation.current;
    const hush = () => {
      clearTimeout(entry.timer);
      entry.quiet = false;
      entry.timer = setTimeout(() => { entry.quiet = true; drawSoon(); }, QUIET_MS);
    };
    hush();
    entry.stream = followStream(`/runs/${enc(runId)}/events`, {
      onEvent(msg) {
        if (!applyRunEvent(entry.answer, msg)) return;
        if (msg.event === 'heartbeat') entry.quiet = true;
        else hush();
        drawSoon();
      },
      onState(state, info) {
        if (state === 'error') { setProblem(info.error); stopFollowing(runId); redraw(); }
        if (state === 'ended' && mine === generation.current) settle(runId, mine);
      },
    });
    drawSoon();
    return entry;
  }, [drawSoon, settle, stopFollowing]);

  const reset = useCallback(() => {
    closeAll();
    setConversation(null);
    setMessages([]);
    setProblem(null);
  }, [closeAll]);

  const open = useCallback(async (conversationId: string) => {
    closeAll();
    const mine = generation.current;
    setProblem(null);
    try {
      const [c, msgs, going] = await Promise.all([
        api(`/conversations/${enc(conversationId)}`),
        allMessages(conversationId),
        api(`/conversations/${enc(conversationId)}/runs`),
      ]);
      if (mine !== generation.current) return;
      setConversation(c);
      setMessages(msgs);
      document.title = `${c.title} · Chat · Agentix`;
      setMode(c.mode);
      setModel(c.model || '');
      for (const run of going.items || []) follow(run.id); // a reload re-attaches here
      atBottom.current = true;
    } catch (err) {
      setProblem(err);
    }
  }, [closeAll, follow]);

  // The URL names the conversation: open it when it changes (not when this page made it so).
  useEffect(() => {
    if (!id) {
      if (conversationRef.current) reset();
      document.title = 'Chat · Agentix';
      return;
    }
    const wanted = decodeURIComponent(id);
    if (conversationRef.current?.id !== wanted) open(wanted);
  }, [id, open, reset]);

  useEffect(() => {
    loadList();
    modelChoices().then(setModels);
    return () => { closeAll(); if (frame.current !== null) cancelAnimationFrame(frame.current); };
  }, [loadList, closeAll]);

  // Keep the newest text in view while the reader is at the bottom.
  useLayoutEffect(() => {
    const el = thread.current;
    if (el && atBottom.current) el.scrollTop = el.scrollHeight;
  });

  const changeConversation = async (body: Record<string, unknown>) => {
    const c = conversationRef.current;
    if (!c) return;
    try { setConversation(await api(`/conversations/${enc(c.id)}`, { method: 'PATCH', body })); } catch (err: any) { toast(err.message, 'error'); }
  };

  const send = async () => {
    const said = text.trim();
    if (!said || sending) return;
    setSending(true);
    setProblem(null);
    try {
      let c = conversationRef.current;
      if (!c) {
        const title = said.length > 60 ? `${said.slice(0, 57)}…` : said;
        c = await api('/conversations', { method: 'POST', body: { title, mode, model: model || undefined } });
        conversationRef.current = c;
        setConversation(c);
        navigate(`/chat/${enc(c.id)}`, { replace: true });
      }
      const accepted = await api(`/conversations/${enc(c.id)}/messages`, { method: 'POST', body: { text: said } });
      setText('');
      setMessages((m) => [...m, accepted.message]);
      const entry = follow(accepted.run.id);
      if (accepted.run.position) applyRunEvent(entry.answer, { id: null, event: 'queued', data: { position: accepted.run.position } });
      atBottom.current = true;
      redraw();
      loadList();
    } catch (err) {
      setProblem(err);
    } finally {
      setSending(false);
    }
  };

  /** The run Stop ends: the one answering now (the oldest not ended). */
  const activeRun = () => { for (const [runId, entry] of live.current) if (!entry.answer.finished) return runId; return null; };

  // The thread: a run's live answer goes after its messages (after its user message while it runs).
  const nodes: React.ReactNode[] = [];
  const placed = new Set<string>();
  const liveView = (runId: string, entry: Live) => (
    <div className="chat-live-wrap" key={`live-${runId}`}>
      <LiveView answer={entry.answer} quiet={entry.quiet} toggled={entry.toggled}
        onToggle={(key, isOpen) => entry.toggled.set(key, isOpen)}
        decide={async (decision) => {
          await api(`/runs/${enc(runId)}/approval`, { method: 'POST', body: { decision } });
          toast(decision === 'approve' ? 'Approved: the run goes on.' : 'Rejected.', 'ok');
        }} />
    </div>
  );
  messages.forEach((m, i) => {
    nodes.push(<MessageView key={m.id || `m-${i}`} m={m} />);
    const next = messages[i + 1];
    if (m.run_id && live.current.has(m.run_id) && (!next || next.run_id !== m.run_id)) {
      nodes.push(liveView(m.run_id, live.current.get(m.run_id)!));
      placed.add(m.run_id);
    }
  });
  for (const [runId, entry] of live.current) if (!placed.has(runId)) nodes.push(liveView(runId, entry));

  const modelOptions = [['', 'Default (the failover chain)'] as [string, string], ...[...new Set([...models, ...(model ? [model] : [])])].map((n) => [n, n] as [string, string])];
  return (
    <div className="chat-layout">
      <aside className="panel chat-side" aria-labelledby="chat-list-title">
        <div className="page-head"><h2 id="chat-list-title">Conversations</h2>
          <button type="button" data-action="new-conversation" onClick={() => { navigate('/chat'); reset(); }}>New conversation</button></div>
        <ErrorBox error={listProblem} />
        <ConversationList items={list} current={conversation?.id ?? null}
          onOpen={(c) => navigate(`/chat/${enc(c.id)}`)}
          onPatch={async (c, body) => {
            const changed = await api(`/conversations/${enc(c.id)}`, { method: 'PATCH', body });
            if (conversationRef.current && changed.id === conversationRef.current.id) setConversation(changed);
            await loadList();
          }}
          onDelete={async (c) => {
            await api(`/conversations/${enc(c.id)}`, { method: 'DELETE' });
            toast(`“${c.title}” deleted.`, 'ok');
            if (conversationRef.current && c.id === conversationRef.current.id) { navigate('/chat'); reset(); }
            await loadList();
          }} />
      </aside>
      <section className="chat-main">
        <PageHead title={<span data-testid="chat-title">{conversation ? conversation.title : 'New conversation'}</span>}>
          <div className="toolbar">
            <Field label="Mode"><Select name="mode" data-testid="mode" value={mode} options={MODES}
              onChange={(e) => { setMode(e.target.value); changeConversation({ mode: e.target.value }); }} /></Field>
            <Field label="Model"><Select name="model" data-testid="model" value={model} options={modelOptions}
              onChange={(e) => { setModel(e.target.value); changeConversation({ model: e.target.value }); }} /></Field>
          </div>
        </PageHead>
        <ErrorBox error={problem} />
        <div className="chat-thread" data-testid="thread" tabIndex={0} aria-label="Conversation thread" ref={thread}
          onScroll={(ev) => { const el = ev.currentTarget; atBottom.current = el.scrollHeight - el.scrollTop - el.clientHeight < 40; }}>
          {nodes.length ? nodes : <p className="muted chat-hint">Ask anything. The answer streams here; tools and plans show as steps.</p>}
        </div>
        <form className="chat-composer" data-testid="composer" onSubmit={(ev) => { ev.preventDefault(); send(); }}>
          <MessageBox value={text} onChange={setText} onSend={send} />
          <div className="actions">
            <button type="submit" className="primary" data-action="send" disabled={sending}>Send</button>
            <BusyButton className="danger" data-action="stop" disabled={activeRun() === null} action={async () => {
              const runId = activeRun();
              if (!runId) return;
              await api(`/runs/${enc(runId)}/cancel`, { method: 'POST' });
              toast('Stopping: what was written so far is kept.');
            }}>Stop</BusyButton>
          </div>
        </form>
      </section>
    </div>
  );
}
