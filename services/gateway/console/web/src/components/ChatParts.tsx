// How a chat thread looks: stored messages (the truth, their answers as Markdown) and a run's
// live answer (a preview folded by chatstate.ts, shown as plain text while it streams).

import type { ReactNode } from 'react';
import { fmtJson, fmtMs } from '../lib/format';
import type { Answer } from '../lib/chatstate';
import { Badge, BusyButton } from './ui';
import { Markdown } from './Markdown';

function ToolStep({ name, input, result, error, ok, durationMs, running, stepKey = null, open, onToggle }: {
  name?: string; input?: unknown; result?: unknown; error?: unknown; ok?: boolean; durationMs?: number | null; running?: boolean;
  stepKey?: string | null; open?: boolean; onToggle?: (key: string, open: boolean) => void;
}) {
  const mark = running ? <Badge text="running" /> : <Badge text={ok === false ? 'error' : 'ok'} />;
  return (
    <details className="chat-tool" data-testid="tool-step" data-key={stepKey ?? undefined} open={open}
      onToggle={(ev) => { if (stepKey && onToggle) onToggle(stepKey, (ev.target as HTMLDetailsElement).open); }}>
      <summary>Tool <code>{name || '?'}</code> {mark}{durationMs !== null && durationMs !== undefined ? <span className="muted small">{` ${fmtMs(durationMs)}`}</span> : null}</summary>
      <div className="small muted">input</div><pre>{fmtJson(input ?? {})}</pre>
      {ok === false ? <><div className="small muted">error</div><pre>{fmtJson(error ?? '')}</pre></>
        : result !== undefined && result !== null ? <><div className="small muted">result</div><pre>{fmtJson(result)}</pre></> : null}
    </details>
  );
}

// Failover notices during a run: the run goes on with another model, nothing failed yet.
const NOTICE_CODES = new Set(['breaker_open', 'model_skipped']);

function Thinking({ text, open, stepKey = null, onToggle }: { text: string; open?: boolean; stepKey?: string | null; onToggle?: (key: string, open: boolean) => void }) {
  return (
    <details className="chat-thinking" data-testid="thinking" data-key={stepKey ?? undefined} open={open}
      onToggle={(ev) => { if (stepKey && onToggle) onToggle(stepKey, (ev.target as HTMLDetailsElement).open); }}>
      <summary>Thinking</summary><pre>{text}</pre>
    </details>
  );
}

/** A stored message: the user's, the assistant's answer (with its tool steps and thinking), an
 * error sentence, or an answer cut short (`interrupted`, shown as the plain text it stopped at). */
export function MessageView({ m }: { m: any }) {
  const kind = m.message_type === 'error' ? 'error' : m.role;
  const markdown = m.role === 'assistant' && m.message_type === 'text';
  return (
    <article className={`chat-msg chat-${kind}${m.message_type === 'interrupted' ? ' chat-interrupted' : ''}`}
      data-testid="message" data-role={m.role} data-type={m.message_type} data-run={m.run_id || ''}>
      {m.message_type === 'interrupted' ? <div className="chat-mark"><Badge text="interrupted" kind="cancelled" /> the answer stopped here</div> : null}
      {m.thinking ? <Thinking text={m.thinking} /> : null}
      {(m.tool_events || []).map((t: any, i: number) => <ToolStep key={i} name={t.name} input={t.input} result={t.result} error={t.error} ok={t.ok} durationMs={t.duration_ms} />)}
      {markdown ? <Markdown className="chat-text" testid="message-text" text={m.content || ''} /> : <div className="chat-text plain" data-testid="message-text">{m.content || ''}</div>}
      {m.role === 'assistant' && (m.model || m.usage) ? (
        <div className="muted small">{m.model || ''}{m.usage && m.usage.completion_tokens ? ` · ${m.usage.completion_tokens} tokens` : ''}</div>
      ) : null}
    </article>
  );
}

function DecisionButtons({ decide }: { decide: (d: string) => Promise<void> }) {
  return (
    <div className="actions">
      <BusyButton className="ok solid" data-action="approve" action={() => decide('approve')}>Approve</BusyButton>
      <BusyButton className="danger solid" data-action="reject" action={() => decide('reject')}>Reject</BusyButton>
    </div>
  );
}

/**
 * A run's live answer. `decide(decision)` answers an approval; `quiet` says the stream is alive
 * but nothing came for a while; `toggled` keeps the steps the reader opened or closed.
 */
export function LiveView({ answer, decide, quiet, toggled, onToggle }: {
  answer: Answer; decide: (d: string) => Promise<void>; quiet: boolean; toggled: Map<string, boolean>; onToggle: (key: string, open: boolean) => void;
}) {
  const waiting = answer.queued !== null && !answer.finished;
  const parts: ReactNode[] = answer.parts.map((p, i) => {
    if (p.type === 'thinking') {
      const key = `thinking-${i}`;
      return <Thinking key={key} stepKey={key} text={p.text} open={toggled.has(key) ? toggled.get(key) : !p.done} onToggle={onToggle} />;
    }
    if (p.type === 'tool') {
      const key = `tool-${p.callId}`;
      return <ToolStep key={key} stepKey={key} name={p.tool} input={p.args ?? (p.argsText || undefined)} result={p.result} error={p.error} ok={p.ok}
        durationMs={p.durationMs} running={p.ok === undefined} open={toggled.get(key) ?? false} onToggle={onToggle} />;
    }
    return <div key={`text-${i}`} className="chat-text plain" data-testid="live-text">{p.text}</div>;
  });
  return (
    <article className="chat-msg chat-assistant chat-live" data-testid="live-answer" data-run={answer.runId} aria-busy={String(!answer.finished) as 'true' | 'false'}>
      {waiting ? <div className="notice" data-testid="queued">{`Queued — ${answer.queued} ${answer.queued === 1 ? 'run' : 'runs'} ahead of this one.`}</div> : null}
      {answer.plan ? (
        <section className="chat-plan" data-testid="plan">
          <h3>Plan</h3>
          <ol>{answer.plan.map((step, i) => <li key={i}>{step}</li>)}</ol>
          {answer.approval && answer.approval.kind === 'plan' ? <DecisionButtons decide={decide} /> : null}
          {answer.decision ? <p className="small"><Badge text={answer.decision.decision} kind={answer.decision.decision === 'approve' ? 'ok' : 'error'} />{answer.decision.by ? ` by ${answer.decision.by}` : ''}</p> : null}
        </section>
      ) : null}
      {parts}
      {answer.approval && answer.approval.kind === 'tool' ? (
        <section className="approval-box" data-testid="tool-approval">
          <h3>Run the tool <code>{answer.approval.tool}</code>?</h3>
          {answer.approval.message ? <p>{answer.approval.message}</p> : null}
          <pre>{fmtJson(answer.approval.args ?? {})}</pre>
          <DecisionButtons decide={decide} />
        </section>
      ) : null}
      {answer.approval && answer.approval.kind === 'plan' && !answer.plan ? (
        <div className="approval-box"><pre>{answer.approval.message}</pre><DecisionButtons decide={decide} /></div>
      ) : null}
      {answer.errors.map((e, i) => (NOTICE_CODES.has(e.code)
        ? <div key={i} className="notice warn small">{e.message || e.code}</div>
        : <div key={i} className="error" role="alert" data-testid="live-error">{e.message || e.code}</div>))}
      {!answer.finished && !waiting && !answer.approval ? (
        <div className="muted small chat-typing">{quiet ? 'The model is quiet — still working…' : <span className="cursor" aria-hidden="true"> </span>}</div>
      ) : null}
    </article>
  );
}

/** The composer's text: Enter sends, Shift+Enter starts a new line (and Enter while an input
 * method is composing a character is left to it). */
export function MessageBox({ value, onChange, onSend }: { value: string; onChange: (v: string) => void; onSend: () => void }) {
  return (
    <textarea name="text" rows={3} aria-label="Message" placeholder="Write a message… (Enter sends, Shift+Enter starts a new line)" maxLength={100000}
      value={value} onChange={(e) => onChange(e.target.value)}
      onKeyDown={(ev) => {
        if (ev.key === 'Enter' && !ev.shiftKey && !ev.nativeEvent.isComposing) { ev.preventDefault(); onSend(); }
      }} />
  );
}
