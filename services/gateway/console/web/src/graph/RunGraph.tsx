// A workflow drawn read-only (the New run preview, a run's live graph): laid out by dagre, nodes
// coloured by status, each node a button that selects it.

import { useEffect, useMemo, useState } from 'react';
import { Background, Controls, MarkerType, ReactFlow, ReactFlowProvider, useNodesState, type Edge } from '@xyflow/react';
import { api } from '../lib/api';
import { usedHandles, type Dsl, type KindInfo } from '../lib/dsl';
import { layoutGraph } from './layout';
import { nodeTypes, type WorkflowFlowNode } from './WorkflowNode';

// The node catalog, asked once per page load: only the icons and handles come from it here.
let catalog: Promise<Record<string, KindInfo>> | null = null;
function useKinds(): Record<string, KindInfo> {
  const [kinds, setKinds] = useState<Record<string, KindInfo>>({});
  useEffect(() => {
    catalog ??= api('/dsl/kinds').then((out) => Object.fromEntries(out.kinds.map((k: KindInfo) => [k.kind, k])), () => { catalog = null; return {}; });
    let live = true;
    catalog.then((k) => { if (live) setKinds(k); });
    return () => { live = false; };
  }, []);
  return kinds;
}

function Graph({ dsl, statuses, selected, onSelect }: { dsl: Dsl; statuses: Record<string, string>; selected: string | null; onSelect?: (id: string) => void }) {
  const nodesIn = useMemo(() => (Array.isArray(dsl?.nodes) ? dsl.nodes.filter((n) => n && typeof n.id === 'string') : []), [dsl]);
  const edgesIn = useMemo(() => (Array.isArray(dsl?.edges) ? dsl.edges.filter((e) => e && e.source && e.target) : []), [dsl]);
  const kinds = useKinds();
  const placed = useMemo<WorkflowFlowNode[]>(() => {
    // Without edges (the workflow is unknown) keep the nodes' order in a row.
    const placing = edgesIn.length || nodesIn.length < 2 ? edgesIn : nodesIn.slice(1).map((n, i) => ({ source: nodesIn[i].id, target: n.id }));
    const positions = layoutGraph(nodesIn, placing);
    const used = usedHandles(edgesIn);
    return nodesIn.map((n) => ({
      id: n.id, type: 'workflow', position: positions.get(n.id) || { x: 0, y: 0 },
      data: { dsl: n, info: kinds[n.kind], status: 'pending', onActivate: onSelect, usedHandles: used.get(n.id) },
    }));
  }, [nodesIn, edgesIn, kinds]); // eslint-disable-line react-hooks/exhaustive-deps
  // Nodes live in React Flow's state (it writes their measured size into them); statuses and the
  // selection are changed in place, node by node.
  const [nodes, setNodes, onNodesChange] = useNodesState<WorkflowFlowNode>(placed);
  useEffect(() => setNodes(placed), [placed, setNodes]);
  const statusKey = JSON.stringify(statuses);
  useEffect(() => {
    setNodes((list) => list.map((n) => {
      const status = statuses[n.id] || 'pending';
      const isSelected = n.id === selected;
      if (n.data.status === status && Boolean(n.selected) === isSelected && n.data.onActivate === onSelect) return n;
      return { ...n, selected: isSelected, data: { ...n.data, status, onActivate: onSelect } };
    }));
  }, [statusKey, selected, placed, onSelect]); // eslint-disable-line react-hooks/exhaustive-deps
  const edges: Edge[] = useMemo(() => edgesIn.map((e, i) => ({
    id: `e${i}`, source: e.source, target: e.target, sourceHandle: e.sourceHandle || null,
    markerEnd: { type: MarkerType.ArrowClosed }, className: statuses[e.source] === 'done' ? 'edge-done' : undefined,
  })), [edgesIn, statusKey]); // eslint-disable-line react-hooks/exhaustive-deps
  return (
    <ReactFlow nodes={nodes} edges={edges} nodeTypes={nodeTypes} onNodesChange={onNodesChange} fitView fitViewOptions={{ padding: 0.12, maxZoom: 1 }}
      nodesDraggable={false} nodesConnectable={false} nodesFocusable={false} edgesFocusable={false} elementsSelectable={false}
      onNodeClick={onSelect ? (_, n) => onSelect(n.id) : undefined}
      minZoom={0.2} proOptions={{ hideAttribution: true }} panOnScroll={false} zoomOnScroll={false} preventScrolling={false}>
      <Background gap={20} size={1} />
      <Controls showInteractive={false} />
    </ReactFlow>
  );
}

export function RunGraph({ dsl, statuses = {}, selected = null, onSelect, label, height = 340 }: {
  dsl: Dsl; statuses?: Record<string, string>; selected?: string | null; onSelect?: (id: string) => void; label: string; height?: number;
}) {
  return (
    <div className="flow-box" style={{ height }} role="group" aria-label={label}>
      <ReactFlowProvider><Graph dsl={dsl} statuses={statuses} selected={selected} onSelect={onSelect} /></ReactFlowProvider>
    </div>
  );
}
