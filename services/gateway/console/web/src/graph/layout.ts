// Auto-layout of a workflow graph with dagre: left to right, so a pipeline reads like a sentence.

import dagre from '@dagrejs/dagre';

export const NODE_W = 172;
export const NODE_H = 58;

export interface Placed { x: number; y: number }

/** Top-left positions of the nodes, layered along their edges (sources left of targets). */
export function layoutGraph(nodes: { id: string }[], edges: { source: string; target: string }[]): Map<string, Placed> {
  const g = new dagre.graphlib.Graph({ multigraph: true });
  g.setGraph({ rankdir: 'LR', nodesep: 28, ranksep: 96, marginx: 16, marginy: 16 });
  g.setDefaultEdgeLabel(() => ({}));
  const known = new Set(nodes.map((n) => n.id));
  for (const n of nodes) g.setNode(n.id, { width: NODE_W, height: NODE_H });
  edges.forEach((e, i) => {
    if (known.has(e.source) && known.has(e.target) && e.source !== e.target) g.setEdge(e.source, e.target, {}, `e${i}`);
  });
  dagre.layout(g);
  const out = new Map<string, Placed>();
  for (const n of nodes) {
    const p = g.node(n.id);
    out.set(n.id, { x: Math.round(p.x - NODE_W / 2), y: Math.round(p.y - NODE_H / 2) });
  }
  return out;
}
