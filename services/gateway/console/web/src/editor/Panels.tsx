// The editor's smaller parts: the palette, the problem list, the saved-workflow picker, the
// version list with its diff, and the run's input form.

import { memo, useEffect, useRef, useState } from 'react';
import { api, enc } from '../lib/api';
import { fmtTime, problemItemText } from '../lib/format';
import type { ProblemItem } from '../lib/api';
import type { Dsl, KindInfo } from '../lib/dsl';
import { inputSchema } from '../lib/dsl';
import { BusyButton, Dialog, Empty, ErrorBox, Loading } from '../components/ui';
import { DiffView } from '../components/DiffView';
import { InputForm, type InputFormHandle } from '../components/InputForm';

export const KIND_MIME = 'application/x-agentix-kind';

export const Palette = memo(function Palette({ kinds, onAdd }: { kinds: KindInfo[] | null; onAdd: (kind: string) => void }) {
  return (
    <nav className="palette" aria-label="Node kinds" data-testid="palette">
      <h2>Nodes</h2>
      <p className="muted small">Drag onto the canvas (or press Enter).</p>
      {kinds === null ? <Loading /> : (
        <ul>
          {kinds.map((k) => (
            <li key={k.kind}>
              <button type="button" className="palette-item" draggable data-kind={k.kind} title={k.description} aria-label={k.label}
                onDragStart={(ev) => { ev.dataTransfer.setData(KIND_MIME, k.kind); ev.dataTransfer.effectAllowed = 'copy'; }}
                onClick={() => onAdd(k.kind)}>
                <span className="wf-icon" aria-hidden="true">{k.icon}</span>
                <span><strong>{k.label}</strong><span className="muted small">{k.description}</span></span>
              </button>
            </li>
          ))}
        </ul>
      )}
    </nav>
  );
});

export interface Problems { errors: ProblemItem[]; warnings: ProblemItem[]; ms: number | null; pending: boolean; failed: unknown }

export const ProblemList = memo(function ProblemList({ problems, onPick }: { problems: Problems; onPick: (p: ProblemItem) => void }) {
  const all = [...problems.errors.map((p) => ({ p, level: 'error' })), ...problems.warnings.map((p) => ({ p, level: 'warning' }))];
  return (
    <section className="problems" data-testid="problems" aria-label="Problems" data-count={problems.errors.length}
      data-validation-ms={problems.ms ?? ''} data-pending={String(problems.pending)}>
      <h2>
        {problems.errors.length ? `${problems.errors.length} problem${problems.errors.length === 1 ? '' : 's'}` : 'No problems'}
        {problems.warnings.length ? ` · ${problems.warnings.length} warning${problems.warnings.length === 1 ? '' : 's'}` : ''}
        <span className="muted small">{problems.pending ? ' checking…' : problems.ms !== null ? ` checked in ${Math.round(problems.ms)} ms` : ''}</span>
      </h2>
      <ErrorBox error={problems.failed} />
      {all.length ? (
        <ul>
          {all.map(({ p, level }, i) => (
            <li key={i} className={`problem-${level}`}>
              <button type="button" className="link" onClick={() => onPick(p)} data-node={p.node_id ?? undefined} data-edge={p.edge_index ?? undefined}>
                {p.code ? <code>{p.code}</code> : null} {problemItemText(p)}
              </button>
            </li>
          ))}
        </ul>
      ) : null}
    </section>
  );
});

export function OpenDialog({ onOpen, onClose }: { onOpen: (id: string) => void; onClose: () => void }) {
  const [items, setItems] = useState<any[] | null>(null);
  const [error, setError] = useState<unknown>(null);
  useEffect(() => { api('/workflows', { query: { limit: 200 } }).then((p) => setItems(p.items || []), setError); }, []);
  return (
    <Dialog title="Open a saved workflow" onClose={onClose}>
      <div className="body">
        <ErrorBox error={error} />
        {items === null ? <Loading /> : items.length ? (
          <ul className="chain">{items.map((w) => (
            <li key={w.id}><button type="button" className="link" onClick={() => onOpen(w.id)}>{w.name}</button>
              <span className="muted small">updated {fmtTime(w.updated_at)}</span></li>
          ))}</ul>
        ) : <Empty message="No saved workflow yet." />}
      </div>
    </Dialog>
  );
}

const pretty = (v: unknown) => `${JSON.stringify(v, null, 2)}\n`;

export function VersionsDialog({ workflowId, current, onRestore, onClose }: {
  workflowId: string; current: Dsl; onRestore: (v: any) => Promise<void>; onClose: () => void;
}) {
  const [items, setItems] = useState<any[] | null>(null);
  const [picked, setPicked] = useState<any>(null);
  const [error, setError] = useState<unknown>(null);
  const pick = async (n: number) => {
    try { setPicked(await api(`/workflows/${enc(workflowId)}/versions/${n}`)); } catch (err) { setError(err); }
  };
  useEffect(() => {
    api(`/workflows/${enc(workflowId)}/versions`).then((p) => { setItems(p.items || []); if (p.items?.length > 1) pick(p.items[1].version); }, setError);
  }, [workflowId]); // eslint-disable-line react-hooks/exhaustive-deps
  return (
    <Dialog title="Versions" onClose={onClose}>
      <div className="body versions">
        <ErrorBox error={error} />
        {items === null ? <Loading /> : (
          <ol className="chain" data-testid="versions">
            {items.map((v) => (
              <li key={v.version} data-version={v.version} className={picked?.version === v.version ? 'current' : undefined}>
                <button type="button" className="link" onClick={() => pick(v.version)} aria-label={`Version ${v.version}`}>{`v${v.version}`}</button>
                <span className="muted small">{`${v.name} · ${v.nodes} nodes · ${v.created_by} · ${fmtTime(v.created_at)}`}</span>
              </li>
            ))}
          </ol>
        )}
        {picked ? (
          <>
            <h3>{`v${picked.version} → the canvas now`}</h3>
            <DiffView a={pretty(picked.dsl)} b={pretty(current)} labelA={`v${picked.version}`} labelB="the canvas" />
            <div className="actions">
              <BusyButton className="primary" data-action="restore" action={async () => { await onRestore(picked); onClose(); }}>{`Restore v${picked.version}`}</BusyButton>
            </div>
          </>
        ) : null}
      </div>
    </Dialog>
  );
}

export function RunDialog({ dsl, onStart, onClose }: { dsl: Dsl; onStart: (input: Record<string, unknown>) => Promise<void>; onClose: () => void }) {
  const form = useRef<InputFormHandle>(null);
  const [error, setError] = useState<unknown>(null);
  return (
    <Dialog title="Run this workflow" onClose={onClose}>
      <form className="body" onSubmit={async (ev) => {
        ev.preventDefault();
        setError(null);
        try { await onStart(form.current!.read()); } catch (err) { setError(err); }
      }}>
        <InputForm ref={form} schema={inputSchema(dsl)} />
        <ErrorBox error={error} />
        <div className="actions"><button type="submit" className="primary" data-action="start-run">Start run</button><button type="button" onClick={onClose}>Cancel</button></div>
      </form>
    </Dialog>
  );
}
