// What one node of a run did: its tokens, thinking, branch decision, approval, tool calls,
// evaluations, experts, guardrails, items of a map, error, output and usage. Shared by the run
// page and the editor's run panel.

import { useLayoutEffect, useRef } from 'react';
import { fmtJson, fmtMs, fmtNum } from '../lib/format';
import type { DslNode } from '../lib/dsl';
import { Badge, Empty, ErrorBox } from './ui';

export const MODEL_KINDS = new Set(['agent', 'dual', 'coordinator', 'map']);

function ToolCall({ t }: { t: any }) {
  return (
    <div className="call" data-call={t.call_id}>
      <div><strong><code>{t.tool}</code></strong>{' '}
        {t.result === undefined && t.ok === undefined ? <Badge text="running" /> : <Badge text={t.ok ? 'ok' : 'error'} />}
        {t.duration_ms !== undefined ? <span className="muted small">{` ${fmtMs(t.duration_ms)}`}</span> : null}</div>
      <div className="small muted">arguments</div><pre>{fmtJson(t.args ?? {})}</pre>
      {t.ok === false ? <><div className="small muted">error</div><pre>{fmtJson(t.error ?? '')}</pre></>
        : t.result !== undefined ? <><div className="small muted">result</div><pre>{fmtJson(t.result)}</pre></> : null}
    </div>
  );
}

function configSummary(node: DslNode | undefined) {
  if (!node || !node.config) return null;
  const c = node.config;
  const main = c.prompt ?? c.value ?? c.condition ?? c.message ?? c.goal ?? c.query ?? (c.tool ? `${c.tool}(${JSON.stringify(c.args || {})})` : null);
  return <details><summary>Configuration</summary><pre className="small">{main !== null && main !== undefined ? (typeof main === 'string' ? main : fmtJson(main)) : fmtJson(c)}</pre></details>;
}

/** The token box keeps its scroll position at the bottom while text streams in. */
function Tokens({ nodeId, text, running }: { nodeId: string; text: string; running: boolean }) {
  const ref = useRef<HTMLPreElement>(null);
  const atBottom = useRef(true);
  useLayoutEffect(() => { const el = ref.current; if (el && atBottom.current) el.scrollTop = el.scrollHeight; });
  return (
    <pre className="tokens" data-testid="tokens" data-node={nodeId} tabIndex={0} aria-label="Token stream of the selected node" ref={ref}
      onScroll={(ev) => { const el = ev.currentTarget; atBottom.current = el.scrollHeight - el.scrollTop - el.clientHeight < 24; }}>
      {text}
      {running ? <span className="cursor" aria-hidden="true"> </span> : null}
      {!text && !running ? <span className="muted">(no tokens)</span> : null}
    </pre>
  );
}

export function NodeTrace({ nodeId, state, def, extra }: { nodeId: string | null; state: any; def?: DslNode; extra?: React.ReactNode }) {
  if (!nodeId) {
    return (
      <section className="panel" data-testid="node-panel" aria-live="off">
        <h2>Node</h2><Empty message="Select a node in the graph (click, or Tab and Enter) to see its tokens, tool calls and result." />
      </section>
    );
  }
  const n = state.nodes[nodeId] || { status: 'pending', text: '', thinking: '', tools: [], evals: [], guardrails: [], experts: [] };
  const subs = Object.values(state.nodes as Record<string, any>).filter((s) => s.id !== nodeId && (s.id.startsWith(`${nodeId}[`) || s.id.startsWith(`${nodeId}.`) || s.id.startsWith(`${nodeId}/`)));
  // Only model-driven nodes stream tokens; for the others the box would only say "none".
  const streams = Boolean(n.text) || MODEL_KINDS.has(n.kind || def?.kind);
  return (
    <section className="panel" data-testid="node-panel" data-node={nodeId} aria-live="off">
      <h2>Node <code>{nodeId}</code> <span className="muted small">{n.kind || def?.kind || ''}</span> <Badge text={n.status} /></h2>
      {n.durationMs !== null && n.durationMs !== undefined ? <p className="small muted">{`took ${fmtMs(n.durationMs)}`}</p> : null}
      {extra}
      {streams ? <><h3>Tokens</h3>{n.status === 'pending' && !n.text ? <pre className="tokens" data-testid="tokens" data-node={nodeId}><span className="muted">(not started)</span></pre>
        : <Tokens nodeId={nodeId} text={n.text || ''} running={n.status === 'running'} />}</> : null}
      {n.thinking ? <details><summary>Thinking</summary><pre className="tokens thinking">{n.thinking}</pre></details> : null}
      {n.branch ? <p data-testid="branch">Branch decision: <Badge text={n.branch} kind="canary" /></p> : null}
      {n.approval ? (
        <div><h3>Approval</h3><pre>{n.approval.message || ''}</pre>
          {n.approval.decision ? <p><Badge text={n.approval.decision} kind={n.approval.decision === 'approve' ? 'ok' : 'error'} />{` by ${n.approval.by}`}{n.approval.comment ? ` — “${n.approval.comment}”` : ''}</p> : null}</div>
      ) : null}
      {n.tools.length ? <><h3>{`Tool calls (${n.tools.length})`}</h3>{n.tools.map((t: any, i: number) => <ToolCall key={t.call_id || i} t={t} />)}</> : null}
      {n.evals.length ? <><h3>Evaluation</h3><ul>{n.evals.map((e: any, i: number) => (
        <li key={i}>{`score ${e.score} `}<Badge text={e.grade} />{e.regenerated ? ' regenerated' : ''}{e.reasons.length ? ` — ${e.reasons.join('; ')}` : ''}</li>
      ))}</ul></> : null}
      {n.experts.length ? <><h3>Experts</h3><ul>{n.experts.map((e: any, i: number) => <li key={i}><strong>{e.name}</strong> <Badge text={e.status} /><div className="small muted">{e.brief}</div></li>)}</ul></> : null}
      {n.guardrails.length ? <><h3>Guardrails</h3><ul>{n.guardrails.map((g: any, i: number) => <li key={i}>{`tier ${g.tier} `}<Badge text={g.action} />{` ${g.reason}`}</li>)}</ul></> : null}
      {subs.length ? <><h3>Items</h3>{subs.map((s: any) => <details key={s.id}><summary><code>{s.id}</code> <Badge text={s.status} /></summary><pre className="small">{s.text || s.outputPreview || s.error || ''}</pre></details>)}</> : null}
      {n.error ? <ErrorBox error={new Error(n.error)} /> : null}
      {n.outputPreview ? <><h3>Output</h3><pre className="small" data-testid="node-output">{n.outputPreview}</pre></> : null}
      {n.usage ? <p className="small muted">{`usage: ${fmtNum(n.usage.prompt_tokens)} prompt + ${fmtNum(n.usage.completion_tokens)} completion tokens${n.usage.models?.length ? ` on ${n.usage.models.join(', ')}` : ''}`}</p> : null}
      {configSummary(def)}
    </section>
  );
}
