// One node of a workflow on a React Flow canvas (the editor's and the run views'): its title,
// kind and status, its input handle, its output handles (a branch's named, labelled beside the
// handle outside the box so no two labels and no label and node ever overlap), the validator's
// problems pinned on it, and an approval asked in place.

import { memo, useEffect } from 'react';
import { Handle, Position, useUpdateNodeInternals, type Node, type NodeProps } from '@xyflow/react';
import { STATUS_MARK, acceptsInput, sourceHandles, type DslNode, type KindInfo } from '../lib/dsl';
import { BusyButton } from '../components/ui';

export interface WorkflowNodeData extends Record<string, unknown> {
  dsl: DslNode;
  info?: KindInfo;
  status?: string;
  problems?: string[];
  /** Read-only graphs: the node is a button that selects it (Enter, Space; clicks come through React Flow's onNodeClick). */
  onActivate?: (id: string) => void;
  /** Handles its edges use, drawn even when the node does not offer them (so the edge shows, and its problem with it). */
  usedHandles?: string[];
  /** While the node waits for an approval: answer it here. */
  decide?: (decision: 'approve' | 'reject') => Promise<void>;
}

export type WorkflowFlowNode = Node<WorkflowNodeData, 'workflow'>;

function clip(text: string, max: number) {
  return text.length > max ? `${text.slice(0, max - 1)}…` : text;
}

function WorkflowNodeView({ id, data, selected }: NodeProps<WorkflowFlowNode>) {
  const { dsl, info, onActivate, decide } = data;
  const status = data.status || 'pending';
  const offered = sourceHandles(dsl, info);
  // A branch also takes `default` (when nothing else matches) where an edge uses it.
  const known = new Set<string | null>(dsl.kind === 'branch' ? [...offered, 'default'] : offered);
  const handles = [...offered, ...(data.usedHandles || []).filter((h) => !offered.includes(h))];
  // React Flow learns where a node's handles are when it measures the node: tell it when they change.
  const updateInternals = useUpdateNodeInternals();
  const handleKey = handles.join('\n');
  useEffect(() => { updateInternals(id); }, [handleKey, id, updateInternals]);
  const problems = data.problems || [];
  const title = clip(dsl.label ? String(dsl.label) : dsl.id, 22);
  const activate = onActivate ? () => onActivate(dsl.id) : undefined;
  return (
    <div
      className={`wf-node status-${status}${selected ? ' selected' : ''}${problems.length ? ' has-problem' : ''}`}
      data-node-id={dsl.id} data-kind={dsl.kind} data-status={status}
      role={onActivate ? 'button' : 'group'} tabIndex={onActivate ? 0 : undefined}
      aria-label={`${dsl.id} (${dsl.kind}): ${status}`} aria-pressed={onActivate ? (selected ? 'true' : 'false') : undefined}
      onKeyDown={activate ? (ev) => { if (ev.key === 'Enter' || ev.key === ' ') { ev.preventDefault(); activate(); } } : undefined}
    >
      {acceptsInput(dsl, info) ? <Handle type="target" position={Position.Left} aria-label={`${dsl.id} input`} /> : null}
      <div className="wf-title"><span className="wf-icon" aria-hidden="true">{info?.icon || '•'}</span>{title}</div>
      <div className="wf-kind">{clip(dsl.label ? `${dsl.id} · ${dsl.kind}` : dsl.kind, 26)}</div>
      <span className="wf-mark" aria-hidden="true">{STATUS_MARK[status] || '•'}</span>
      {problems.length ? (
        <div className="wf-problem" data-testid="node-problem" role="note" title={problems.join('\n')}>
          {problems.length === 1 ? problems[0] : `${problems[0]} (+${problems.length - 1})`}
        </div>
      ) : null}
      {decide ? (
        <div className="wf-approval nodrag" data-testid="node-approval">
          <BusyButton className="small ok solid" data-action="approve" action={() => decide('approve')}>Approve</BusyButton>
          <BusyButton className="small danger solid" data-action="reject" action={() => decide('reject')}>Reject</BusyButton>
        </div>
      ) : null}
      {handles.map((h, i) => {
        const top = `${((i + 1) / (handles.length + 1)) * 100}%`;
        return (
          <div key={h ?? ''}>
            <Handle type="source" position={Position.Right} id={h ?? undefined} style={{ top }} className={known.has(h) ? undefined : 'handle-unknown'}
              aria-label={h ? `${dsl.id} output ${h}` : `${dsl.id} output`} />
            {h ? <span className="edge-label handle-label" data-handle={h} style={{ top }} title={h}>{clip(h, 10)}</span> : null}
          </div>
        );
      })}
    </div>
  );
}

export const WorkflowNodeComponent = memo(WorkflowNodeView);
export const nodeTypes = { workflow: WorkflowNodeComponent };
