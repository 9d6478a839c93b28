// The editor's document: React Flow nodes and edges that carry their DSL objects untouched, so
// a workflow imported and exported again is the same JSON (key order included); positions stay
// beside the DSL (the saved workflow's `layout`), never in it.

import { MarkerType, type Edge } from '@xyflow/react';
import type { Dsl, DslEdge, DslNode, KindInfo } from '../lib/dsl';
import { layoutGraph } from '../graph/layout';
import type { WorkflowFlowNode } from '../graph/WorkflowNode';

export type FlowEdge = Edge<{ dsl: DslEdge }>;
export type Layout = Record<string, { x: number; y: number }>;

export interface EditorDoc {
  /** The imported document without its nodes and edges (its `version`, any other member), in order. */
  template: Record<string, unknown>;
  nodes: WorkflowFlowNode[];
  edges: FlowEdge[];
}

let edgeSeq = 0;
export const newEdgeId = () => `e${(edgeSeq += 1)}`;

export function flowNode(dsl: DslNode, position: { x: number; y: number }, kinds: Record<string, KindInfo>, selected = false): WorkflowFlowNode {
  return { id: dsl.id, type: 'workflow', position, selected, data: { dsl, info: kinds[dsl.kind] } };
}

export function flowEdge(dsl: DslEdge): FlowEdge {
  return {
    id: newEdgeId(), source: dsl.source, target: dsl.target, sourceHandle: dsl.sourceHandle || null,
    markerEnd: { type: MarkerType.ArrowClosed }, data: { dsl },
  };
}

export function emptyDoc(): EditorDoc {
  return { template: { version: '1', nodes: [], edges: [] }, nodes: [], edges: [] };
}

/**
 * A DSL document (and maybe its saved layout) as editor state; unplaced nodes are laid out. A
 * node still on the canvas (`previous`) keeps its measured size: React Flow shows a node only once
 * it knows its size, and an element that did not change size is not measured again.
 */
export function docFromDsl(dsl: Dsl, kinds: Record<string, KindInfo>, layout?: Layout | null, previous: WorkflowFlowNode[] = []): EditorDoc {
  const nodesIn: DslNode[] = Array.isArray(dsl.nodes) ? dsl.nodes : [];
  const edgesIn: DslEdge[] = Array.isArray(dsl.edges) ? dsl.edges : [];
  const placed = layout && nodesIn.every((n) => layout[n.id]) ? null : layoutGraph(nodesIn, edgesIn);
  const measured = new Map(previous.map((n) => [n.id, n.measured]));
  return {
    template: dsl as Record<string, unknown>,
    nodes: nodesIn.map((n) => {
      const node = flowNode(n, (placed ? placed.get(n.id) : layout![n.id]) || { x: 0, y: 0 }, kinds);
      return measured.get(n.id) ? { ...node, measured: measured.get(n.id) } : node;
    }),
    edges: edgesIn.map(flowEdge),
  };
}

/** The DSL of the editor state, in the imported document's member order. */
export function dslOf(doc: { template: Record<string, unknown>; nodes: WorkflowFlowNode[]; edges: FlowEdge[] }): Dsl {
  const nodes = doc.nodes.map((n) => n.data.dsl);
  const edges = doc.edges.map((e) => e.data!.dsl);
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(doc.template)) out[k] = k === 'nodes' ? nodes : k === 'edges' ? edges : v;
  if (!('version' in out)) out.version = '1';
  if (!('nodes' in out)) out.nodes = nodes;
  if (!('edges' in out)) out.edges = edges;
  return out as Dsl;
}

export function layoutOf(nodes: WorkflowFlowNode[]): Layout {
  return Object.fromEntries(nodes.map((n) => [n.id, { x: Math.round(n.position.x), y: Math.round(n.position.y) }]));
}

/** A node renamed: its DSL object keeps its member order, the edges follow it. */
export function renameNode(doc: EditorDoc, from: string, to: string): EditorDoc {
  const rename = (value: string) => (value === from ? to : value);
  return {
    ...doc,
    nodes: doc.nodes.map((n) => (n.id === from ? { ...n, id: to, data: { ...n.data, dsl: { ...n.data.dsl, id: to } } } : n)),
    edges: doc.edges.map((e) => (e.source === from || e.target === from ? {
      ...e, source: rename(e.source), target: rename(e.target),
      data: { dsl: Object.fromEntries(Object.entries(e.data!.dsl).map(([k, v]) => [k, k === 'source' || k === 'target' ? rename(String(v)) : v])) as DslEdge },
    } : e)),
  };
}

/**
 * Nodes and edges of a DSL fragment added to a document (paste, duplicate): ids that are taken
 * get a fresh one (edges follow), the fragment is laid out and put at `at`.
 */
export function addFragment(doc: EditorDoc, fragment: { nodes: DslNode[]; edges: DslEdge[] }, kinds: Record<string, KindInfo>, at: { x: number; y: number }): EditorDoc {
  const taken = new Set(doc.nodes.map((n) => n.id));
  const ids = new Map<string, string>();
  for (const n of fragment.nodes) {
    let id = n.id;
    for (let i = 2; taken.has(id); i += 1) id = `${n.id}_${i}`;
    taken.add(id);
    ids.set(n.id, id);
  }
  const placed = layoutGraph(fragment.nodes, fragment.edges);
  const minX = Math.min(...[...placed.values()].map((p) => p.x));
  const minY = Math.min(...[...placed.values()].map((p) => p.y));
  const nodes = fragment.nodes.map((n) => {
    const p = placed.get(n.id)!;
    return flowNode({ ...n, id: ids.get(n.id)! }, { x: at.x + p.x - minX, y: at.y + p.y - minY }, kinds, true);
  });
  const edges = fragment.edges.filter((e) => ids.has(e.source) && ids.has(e.target))
    .map((e) => ({ ...flowEdge({ ...e, source: ids.get(e.source)!, target: ids.get(e.target)! }), selected: true }));
  return {
    ...doc,
    nodes: [...doc.nodes.map((n) => (n.selected ? { ...n, selected: false } : n)), ...nodes],
    edges: [...doc.edges.map((e) => (e.selected ? { ...e, selected: false } : e)), ...edges],
  };
}

/** The selected part of a document as a DSL fragment (what Copy puts on the clipboard). */
export function selectedFragment(doc: EditorDoc): Dsl | null {
  const nodes = doc.nodes.filter((n) => n.selected);
  if (!nodes.length) return null;
  const ids = new Set(nodes.map((n) => n.id));
  return {
    version: '1',
    nodes: nodes.map((n) => n.data.dsl),
    edges: doc.edges.filter((e) => ids.has(e.source) && ids.has(e.target)).map((e) => e.data!.dsl),
  };
}

/** A clipboard text that is a DSL fragment, or null. */
export function parseFragment(text: string): { nodes: DslNode[]; edges: DslEdge[] } | null {
  try {
    const value = JSON.parse(text);
    if (!value || !Array.isArray(value.nodes) || !value.nodes.every((n: any) => n && typeof n.id === 'string' && typeof n.kind === 'string')) return null;
    return { nodes: value.nodes, edges: Array.isArray(value.edges) ? value.edges.filter((e: any) => e && typeof e.source === 'string' && typeof e.target === 'string') : [] };
  } catch {
    return null;
  }
}
