// The workflow document (docs/DSL.md) as the console sees it: node kinds from
// GET /api/v1/dsl/kinds, the handles each node offers, and the `{{ node.field }}` names a
// template may use.

export interface DslNode { id: string; kind: string; label?: string; config?: Record<string, any>; [key: string]: unknown }
export interface DslEdge { source: string; target: string; sourceHandle?: string; [key: string]: unknown }
export interface Dsl { version: string; nodes: DslNode[]; edges: DslEdge[]; [key: string]: unknown }

/** One entry of GET /dsl/kinds. */
export interface KindInfo {
  kind: string;
  label: string;
  description: string;
  icon: string;
  inputs: number; // 0: nothing may point at it (the input node)
  outputs: string[] | null; // handle names; [""] for the one unnamed output; [] for none
  case_handles: boolean; // handles come from config.cases (+ "default") when it has cases
  default_handle: string | null; // a branch's handle when nothing else matches
  outputs_doc: Record<string, string>; // the fields a downstream template reads: {output: "…"}
  config_schema: Record<string, any>;
}

export const STATUS_MARK: Record<string, string> = {
  pending: '○', running: '◐', done: '✓', skipped: '⤼', failed: '✗', waiting: '‖', cancelled: '■',
};

/** The output handles of a node: named for a branch, one unnamed (null) for most, none for an output. */
export function sourceHandles(node: DslNode, info?: KindInfo): (string | null)[] {
  if (node.kind === 'branch') {
    const cases = node.config?.cases;
    if (Array.isArray(cases)) return [...cases.map((c: any) => String(c?.handle ?? '')).filter(Boolean), 'default'];
    return ['true', 'false'];
  }
  if (info) return info.outputs && info.outputs.length ? info.outputs.map((h) => h || null) : [];
  return node.kind === 'output' ? [] : [null];
}

export function acceptsInput(node: DslNode, info?: KindInfo): boolean {
  if (info) return info.inputs > 0;
  return node.kind !== 'input';
}

/** Every node upstream of `id` (what its templates may name). */
export function upstreamOf(id: string, edges: { source: string; target: string }[]): Set<string> {
  const pred = new Map<string, string[]>();
  for (const e of edges) pred.set(e.target, [...(pred.get(e.target) || []), e.source]);
  const seen = new Set<string>();
  const queue = [...(pred.get(id) || [])];
  while (queue.length) {
    const n = queue.shift()!;
    if (seen.has(n)) continue;
    seen.add(n);
    queue.push(...(pred.get(n) || []));
  }
  return seen;
}

/** The `{{ … }}` completions for a template of node `id`: `node.field` of every upstream node. */
export function completions(id: string, dsl: Dsl, kinds: Record<string, KindInfo>): { name: string; detail: string }[] {
  const up = upstreamOf(id, dsl.edges);
  const out: { name: string; detail: string }[] = [];
  for (const n of dsl.nodes) {
    if (!up.has(n.id)) continue;
    if (n.kind === 'input') {
      const props = n.config?.schema?.properties;
      for (const [field, p] of Object.entries(props && typeof props === 'object' ? props : {})) {
        out.push({ name: `${n.id}.${field}`, detail: (p as any)?.description || (p as any)?.type || 'input field' });
      }
      continue;
    }
    for (const [field, doc] of Object.entries(kinds[n.kind]?.outputs_doc || { output: 'the node\'s output' })) {
      out.push({ name: `${n.id}.${field}`, detail: doc });
    }
  }
  return out;
}

/** A fresh node id for `kind`, not used yet: agent_1, agent_2, … */
export function freshId(kind: string, taken: Set<string>): string {
  for (let i = 1; ; i += 1) {
    const id = `${kind}_${i}`;
    if (!taken.has(id)) return id;
  }
}

/** The input node's JSON Schema, or null. */
export function inputSchema(dsl: Dsl | null): Record<string, any> | null {
  const node = (dsl?.nodes || []).find((n) => n && n.kind === 'input');
  const schema = node?.config?.schema;
  return schema && typeof schema === 'object' ? schema : null;
}

/** The named handles each node's outgoing edges use, sorted: {node id → [handle, …]}. */
export function usedHandles(edges: { source: string; sourceHandle?: string | null }[]): Map<string, string[]> {
  const used = new Map<string, Set<string>>();
  for (const e of edges) {
    if (!e.sourceHandle) continue;
    if (!used.has(e.source)) used.set(e.source, new Set());
    used.get(e.source)!.add(e.sourceHandle);
  }
  return new Map([...used].map(([id, set]) => [id, [...set].sort()]));
}
