// The workflow editor: a palette of every node kind (GET /dsl/kinds), a React Flow canvas to
// drag kinds onto and connect, the selected node's form, live validation pinned on nodes and
// edges, save with versions, open, import/export, a JSON view of the same document, undo/redo,
// copy/paste as DSL JSON (between tabs too), and a run started from the canvas whose nodes
// light up from the task's event stream.

import { useCallback, useEffect, useMemo, useRef, useState } from 'react';
import { useNavigate, useParams } from 'react-router-dom';
import {
  Background, Controls, MiniMap, ReactFlow, ReactFlowProvider, applyEdgeChanges, applyNodeChanges, useNodesInitialized, useReactFlow,
  type Connection, type EdgeChange, type NodeChange,
} from '@xyflow/react';
import { ApiError, api, enc, mcpRequest, session, type ProblemItem } from '../lib/api';
import { completions, freshId, usedHandles, type Dsl, type DslNode, type KindInfo } from '../lib/dsl';
import { useRunStream } from '../lib/useRunStream';
import { Badge, Dialog, ErrorBox, Field, toast, useTitle } from '../components/ui';
import { NodeTrace } from '../components/NodeTrace';
import { layoutGraph, NODE_H, NODE_W } from '../graph/layout';
import { nodeTypes, type WorkflowFlowNode } from '../graph/WorkflowNode';
import {
  addFragment, docFromDsl, dslOf, emptyDoc, flowEdge, flowNode, layoutOf, parseFragment, renameNode, selectedFragment,
  type EditorDoc, type FlowEdge,
} from './doc';
import { History } from './history';
import { NodePanel } from './NodePanel';
import { KIND_MIME, OpenDialog, Palette, ProblemList, RunDialog, VersionsDialog, type Problems } from './Panels';
import type { FormContext, ToolInfo } from './widgets';

const VALIDATE_DEBOUNCE_MS = 200;
const NO_PROBLEMS: Problems = { errors: [], warnings: [], ms: null, pending: false, failed: null };
const pretty = (v: unknown) => `${JSON.stringify(v, null, 2)}\n`;
const editable = (el: EventTarget | null) => el instanceof HTMLElement && (el.isContentEditable || ['INPUT', 'TEXTAREA', 'SELECT'].includes(el.tagName));

/** The live tool registry with descriptions and arguments: the gateway's MCP `tools/list`. */
async function toolRegistry(): Promise<ToolInfo[]> {
  const out = await mcpRequest('tools/list').catch(() => null);
  return (out?.result?.tools || []).sort((a: ToolInfo, b: ToolInfo) => a.name.localeCompare(b.name));
}

async function modelAliases(): Promise<string[]> {
  const names = new Set<string>(['offline']);
  if (session.user?.admin) {
    try {
      const models = await api('/admin/models', { query: { limit: 200 } });
      for (const m of models.items || []) if (m.enabled !== false) names.add(m.name);
    } catch { /* not allowed or down */ }
  }
  return [...names].sort();
}

function Editor() {
  const { id: routeId } = useParams();
  const navigate = useNavigate();
  const flow = useReactFlow();
  const [kinds, setKinds] = useState<KindInfo[] | null>(null);
  const kindMap = useMemo(() => Object.fromEntries((kinds || []).map((k) => [k.kind, k])) as Record<string, KindInfo>, [kinds]);
  const [doc, setDocState] = useState<EditorDoc>(emptyDoc);
  const docRef = useRef(doc);
  docRef.current = doc;
  const [dslRev, setDslRev] = useState(0);
  const dslCounter = useRef(0);
  const jsonOrigin = useRef(-1); // the revision the JSON view itself made (it keeps its own text then)
  const [dirty, setDirty] = useState(false);
  const history = useRef(new History());
  const [, setHistoryRev] = useState(0);
  const [workflow, setWorkflow] = useState<{ id: string; name: string; version: number | null } | null>(null);
  useTitle(workflow ? `${workflow.name} · Editor` : 'Editor');
  const [problems, setProblems] = useState<Problems>(NO_PROBLEMS);
  const validationSeq = useRef(0);
  const [context, setContext] = useState<FormContext>({ completions: [], models: [], tools: null, kbs: null });
  const [dialog, setDialog] = useState<'save' | 'open' | 'versions' | 'run' | null>(null);
  const [saveName, setSaveName] = useState('');
  const [loadError, setLoadError] = useState<unknown>(null);
  const [showJson, setShowJson] = useState(false);
  const [jsonText, setJsonText] = useState('');
  const [jsonError, setJsonError] = useState<string | null>(null);
  const [tab, setTab] = useState<'node' | 'run'>('node');
  const [run, setRun] = useState<{ taskId: string } | null>(null);
  const fileInput = useRef<HTMLInputElement>(null);
  const canvasBox = useRef<HTMLDivElement>(null);
  const pendingFit = useRef(false); // fit the view once the new document's nodes are measured

  /** Change the document; `dsl`: the DSL changed (validate, JSON view); `undo`: remember the state before (a coalescing key, or true). */
  const setDoc = useCallback((next: EditorDoc, { dsl = false, undo = false as boolean | string } = {}) => {
    if (undo !== false) { history.current.push(docRef.current, typeof undo === 'string' ? undo : null); setHistoryRev((r) => r + 1); }
    docRef.current = next;
    setDocState(next);
    if (dsl) { dslCounter.current += 1; setDslRev(dslCounter.current); setDirty(true); }
    else if (undo !== false) setDirty(true);
  }, []);

  // ---------------------------------------------------------------- loading

  useEffect(() => {
    api('/dsl/kinds').then((out) => setKinds(out.kinds), setLoadError);
    (async () => {
      const [models, tools, kbs] = await Promise.all([
        modelAliases(), toolRegistry(),
        api('/kb').then((b) => (Array.isArray(b) ? b : b.items || []).map((k: any) => k.name)).catch(() => []),
      ]);
      setContext((c) => ({ ...c, models, tools, kbs }));
    })();
  }, []);

  const loadWorkflow = useCallback(async (id: string) => {
    try {
      const wf = await api(`/workflows/${enc(id)}`);
      history.current = new History();
      setDoc(docFromDsl(wf.dsl, kindMap, wf.layout, docRef.current.nodes), { dsl: true });
      setWorkflow({ id: wf.id, name: wf.name, version: wf.version ?? null });
      setDirty(false);
      setRun(null);
      pendingFit.current = true;
    } catch (err) { setLoadError(err); }
  }, [kindMap, setDoc, flow]);

  useEffect(() => {
    if (!kinds) return;
    if (routeId && workflow?.id !== routeId) loadWorkflow(decodeURIComponent(routeId));
    if (!routeId && workflow) { setWorkflow(null); history.current = new History(); setDoc(emptyDoc(), { dsl: true }); setDirty(false); }
  }, [routeId, kinds]); // eslint-disable-line react-hooks/exhaustive-deps

  // A document loaded, imported or laid out is fitted to the canvas once React Flow has measured
  // its nodes (before that it does not know their sizes).
  const measured = useNodesInitialized();
  useEffect(() => {
    if (measured && pendingFit.current && docRef.current.nodes.length) { pendingFit.current = false; flow.fitView({ padding: 0.15, maxZoom: 1 }); }
  }, [measured, dslRev, doc, flow]);

  // ---------------------------------------------------------------- validation, pinned on nodes and edges

  const pinProblems = useCallback((errors: ProblemItem[], edgeIds: string[]) => {
    const byNode = new Map<string, string[]>();
    const byEdge = new Map<string, string>();
    for (const e of errors) {
      if (e.edge_index !== undefined && e.edge_index !== null && edgeIds[e.edge_index]) byEdge.set(edgeIds[e.edge_index], e.message || e.code || '');
      else if (e.node_id) byNode.set(e.node_id, [...(byNode.get(e.node_id) || []), e.message || e.code || '']);
    }
    const d = docRef.current;
    let changed = false;
    const nodes = d.nodes.map((n) => {
      const want = byNode.get(n.id);
      const have = n.data.problems;
      if ((want || []).join('\n') === (have || []).join('\n')) return n;
      changed = true;
      return { ...n, data: { ...n.data, problems: want } };
    });
    const edges = d.edges.map((e) => {
      const want = byEdge.get(e.id);
      if ((want ? 'edge-problem' : undefined) === e.className && (want ? `⚠ ${want.slice(0, 48)}` : undefined) === e.label) return e;
      changed = true;
      return { ...e, className: want ? 'edge-problem' : undefined, label: want ? `⚠ ${want.slice(0, 48)}` : undefined };
    });
    if (changed) setDoc({ ...d, nodes, edges });
  }, [setDoc]);

  useEffect(() => {
    if (!kinds) return undefined;
    const d = docRef.current;
    const seq = (validationSeq.current += 1);
    if (!d.nodes.length) { setProblems(NO_PROBLEMS); pinProblems([], []); return undefined; }
    const dsl = dslOf(d);
    const edgeIds = d.edges.map((e) => e.id);
    setProblems((p) => ({ ...p, pending: true }));
    const timer = setTimeout(async () => {
      const started = performance.now();
      let errors: ProblemItem[] = [];
      let warnings: ProblemItem[] = [];
      let failed: unknown = null;
      try {
        warnings = (await api('/dsl/validate', { method: 'POST', body: dsl })).warnings || [];
      } catch (err) {
        if (err instanceof ApiError && err.status === 422) errors = err.errors;
        else failed = err;
      }
      if (seq !== validationSeq.current) return; // the document changed meanwhile: a newer check is coming
      setProblems({ errors, warnings, ms: performance.now() - started, pending: false, failed });
      pinProblems(errors, edgeIds);
    }, VALIDATE_DEBOUNCE_MS);
    return () => clearTimeout(timer);
  }, [dslRev, kinds, pinProblems]);

  // Every handle an edge uses is drawn, offered or not: the edge shows, and so does its problem.
  useEffect(() => {
    const d = docRef.current;
    const used = usedHandles(d.edges.map((e) => e.data!.dsl));
    const nodes = d.nodes.map((n) => {
      const want = used.get(n.id);
      if ((want || []).join('\n') === (n.data.usedHandles || []).join('\n')) return n;
      return { ...n, data: { ...n.data, usedHandles: want } };
    });
    if (nodes.some((n, i) => n !== d.nodes[i])) setDoc({ ...d, nodes });
  }, [dslRev, setDoc]);

  // The JSON view follows the document, except for the change typed in it (its text stays as typed).
  useEffect(() => {
    if (showJson && dslRev !== jsonOrigin.current) { setJsonText(pretty(dslOf(docRef.current))); setJsonError(null); }
  }, [dslRev, showJson]);

  // ---------------------------------------------------------------- canvas events

  const onNodesChange = useCallback((changes: NodeChange<WorkflowFlowNode>[]) => {
    const d = docRef.current;
    const removing = changes.some((c) => c.type === 'remove');
    const nodes = applyNodeChanges(changes, d.nodes);
    const ids = new Set(nodes.map((n) => n.id));
    const edges = removing ? d.edges.filter((e) => ids.has(e.source) && ids.has(e.target)) : d.edges;
    setDoc({ ...d, nodes, edges }, { dsl: removing, undo: removing });
  }, [setDoc]);

  const onEdgesChange = useCallback((changes: EdgeChange<FlowEdge>[]) => {
    const d = docRef.current;
    const removing = changes.some((c) => c.type === 'remove');
    setDoc({ ...d, edges: applyEdgeChanges(changes, d.edges) }, { dsl: removing, undo: removing });
  }, [setDoc]);

  const onConnect = useCallback((c: Connection) => {
    const d = docRef.current;
    const handle = c.sourceHandle || undefined;
    if (d.edges.some((e) => e.source === c.source && e.target === c.target && (e.sourceHandle || undefined) === handle)) return;
    const edge = flowEdge(handle ? { source: c.source, target: c.target, sourceHandle: handle } : { source: c.source, target: c.target });
    setDoc({ ...d, edges: [...d.edges, edge] }, { dsl: true, undo: true });
  }, [setDoc]);

  const addNode = useCallback((kind: string, at?: { x: number; y: number }) => {
    const d = docRef.current;
    const info = kindMap[kind];
    const id = freshId(kind, new Set(d.nodes.map((n) => n.id)));
    let position = at;
    if (!position) {
      const box = canvasBox.current!.getBoundingClientRect();
      const c = flow.screenToFlowPosition({ x: box.left + box.width / 2, y: box.top + box.height / 2 });
      position = { x: c.x - NODE_W / 2 + (d.nodes.length % 5) * 24, y: c.y - NODE_H / 2 + (d.nodes.length % 5) * 24 };
    }
    const dsl: DslNode = { id, kind, config: {} };
    const node = flowNode(dsl, position, kindMap, true);
    setDoc({ ...d, nodes: [...d.nodes.map((n) => (n.selected ? { ...n, selected: false } : n)), node], edges: d.edges.map((e) => (e.selected ? { ...e, selected: false } : e)) }, { dsl: true, undo: true });
    setTab('node');
    if (!info) toast(`Unknown kind ${kind}.`, 'error');
  }, [kindMap, setDoc, flow]);

  const onDrop = useCallback((ev: React.DragEvent) => {
    const kind = ev.dataTransfer.getData(KIND_MIME);
    if (!kind) return;
    ev.preventDefault();
    const p = flow.screenToFlowPosition({ x: ev.clientX, y: ev.clientY });
    addNode(kind, { x: Math.round(p.x - NODE_W / 2), y: Math.round(p.y - NODE_H / 2) });
  }, [flow, addNode]);

  const selectOnly = useCallback((nodeIds: Set<string>, edgeIds: Set<string> = new Set()) => {
    const d = docRef.current;
    setDoc({
      ...d,
      nodes: d.nodes.map((n) => (n.selected === nodeIds.has(n.id) ? n : { ...n, selected: nodeIds.has(n.id) })),
      edges: d.edges.map((e) => (Boolean(e.selected) === edgeIds.has(e.id) ? e : { ...e, selected: edgeIds.has(e.id) })),
    });
  }, [setDoc]);

  // ---------------------------------------------------------------- commands

  const undo = useCallback(() => { const prev = history.current.undo(docRef.current); if (prev) { setDoc(prev, { dsl: true }); setHistoryRev((r) => r + 1); } }, [setDoc]);
  const redo = useCallback(() => { const next = history.current.redo(docRef.current); if (next) { setDoc(next, { dsl: true }); setHistoryRev((r) => r + 1); } }, [setDoc]);

  const autoLayout = useCallback(() => {
    const d = docRef.current;
    const placed = layoutGraph(d.nodes, d.edges);
    setDoc({ ...d, nodes: d.nodes.map((n) => ({ ...n, position: placed.get(n.id) || n.position })) }, { undo: true });
    pendingFit.current = true;
  }, [setDoc, flow]);

  const centre = useCallback(() => {
    const box = canvasBox.current!.getBoundingClientRect();
    return flow.screenToFlowPosition({ x: box.left + box.width / 3, y: box.top + box.height / 3 });
  }, [flow]);

  const paste = useCallback((text: string) => {
    const fragment = parseFragment(text);
    if (!fragment || !fragment.nodes.length) return false;
    setDoc(addFragment(docRef.current, fragment, kindMap, centre()), { dsl: true, undo: true });
    toast(`Pasted ${fragment.nodes.length} node${fragment.nodes.length === 1 ? '' : 's'}.`, 'ok');
    return true;
  }, [setDoc, kindMap, centre]);

  const duplicate = useCallback(() => {
    const d = docRef.current;
    const fragment = selectedFragment(d);
    if (!fragment) return;
    const first = d.nodes.find((n) => n.selected)!;
    setDoc(addFragment(d, fragment, kindMap, { x: first.position.x + 40, y: first.position.y + 40 }), { dsl: true, undo: true });
  }, [setDoc, kindMap]);

  const importText = useCallback((text: string, name: string) => {
    let parsed: Dsl;
    try {
      parsed = JSON.parse(text);
      if (!parsed || typeof parsed !== 'object' || !Array.isArray(parsed.nodes)) throw new Error('a workflow is a JSON object with a `nodes` list');
    } catch (err: any) { toast(`${name}: not a workflow (${err.message}).`, 'error'); return; }
    setDoc(docFromDsl(parsed, kindMap, null, docRef.current.nodes), { dsl: true, undo: true });
    pendingFit.current = true;
    toast(`Imported ${name}.`, 'ok');
  }, [setDoc, kindMap, flow]);

  const exportDsl = useCallback(() => {
    const blob = new Blob([pretty(dslOf(docRef.current))], { type: 'application/json' });
    const a = document.createElement('a');
    a.href = URL.createObjectURL(blob);
    a.download = `${(workflow?.name || 'workflow').replace(/[^A-Za-z0-9_.-]+/g, '_')}.json`;
    document.body.append(a);
    a.click();
    a.remove();
    setTimeout(() => URL.revokeObjectURL(a.href), 10000);
  }, [workflow]);

  const save = useCallback(async (name?: string) => {
    const d = docRef.current;
    const body = { name: name || workflow?.name || 'workflow', dsl: dslOf(d), layout: layoutOf(d.nodes) };
    const out = workflow && !name
      ? await api(`/workflows/${enc(workflow.id)}`, { method: 'PUT', body })
      : await api('/workflows', { method: 'POST', body });
    setWorkflow({ id: out.id, name: out.name, version: out.version ?? null });
    setDirty(false);
    toast(`Saved ${out.name} (version ${out.version}).`, 'ok');
    if (routeId !== out.id) navigate(`/editor/${enc(out.id)}`, { replace: true });
  }, [workflow, routeId, navigate]);

  const newCanvas = useCallback(() => {
    history.current = new History();
    setDoc(emptyDoc(), { dsl: true });
    setWorkflow(null);
    setRun(null);
    setDirty(false);
    setTab('node');
    if (routeId) navigate('/editor');
  }, [setDoc, routeId, navigate]);

  const requestSave = useCallback(() => {
    if (workflow) save().catch((err) => toast(err.message, 'error'));
    else { setSaveName(''); setDialog('save'); }
  }, [workflow, save]);

  const requestRun = useCallback(() => {
    if (!docRef.current.nodes.length) { toast('Draw a workflow first.', 'error'); return; }
    setDialog('run');
  }, []);

  const startRun = useCallback(async (input: Record<string, unknown>) => {
    const dsl = dslOf(docRef.current);
    const out = await api('/tasks', { method: 'POST', body: { dsl, input } });
    setDialog(null);
    setRun({ taskId: out.id });
    setTab('run');
    toast(`Run ${out.id} started.`, 'ok');
  }, []);

  // ---------------------------------------------------------------- keyboard and clipboard

  const onKeyDown = useCallback((ev: KeyboardEvent) => {
    const mod = ev.ctrlKey || ev.metaKey;
    if (!mod) return;
    const key = ev.key.toLowerCase();
    if (key === 's') { ev.preventDefault(); requestSave(); return; }
    if (ev.key === 'Enter') { ev.preventDefault(); requestRun(); return; }
    if (editable(ev.target)) return; // a text field keeps its own undo
    if (key === 'z' && !ev.shiftKey) { ev.preventDefault(); undo(); }
    else if (key === 'y' || (key === 'z' && ev.shiftKey)) { ev.preventDefault(); redo(); }
    else if (key === 'd') { ev.preventDefault(); duplicate(); }
  }, [requestSave, requestRun, undo, redo, duplicate]);

  // On the document: a click on the canvas background leaves the focus on the page's body.
  useEffect(() => {
    const keys = (ev: KeyboardEvent) => { if (!document.querySelector('dialog[open]')) onKeyDown(ev); };
    document.addEventListener('keydown', keys);
    return () => document.removeEventListener('keydown', keys);
  }, [onKeyDown]);

  useEffect(() => {
    const inEditor = () => !editable(document.activeElement) && !document.querySelector('dialog[open]');
    const onCopy = (ev: ClipboardEvent) => {
      if (!inEditor()) return;
      const fragment = selectedFragment(docRef.current);
      if (!fragment || !ev.clipboardData) return;
      ev.clipboardData.setData('text/plain', pretty(fragment));
      ev.preventDefault();
      toast(`Copied ${fragment.nodes.length} node${fragment.nodes.length === 1 ? '' : 's'} as DSL JSON.`);
    };
    const onPaste = (ev: ClipboardEvent) => {
      if (!inEditor()) return;
      const text = ev.clipboardData?.getData('text/plain') || '';
      if (paste(text)) ev.preventDefault();
    };
    document.addEventListener('copy', onCopy);
    document.addEventListener('paste', onPaste);
    return () => { document.removeEventListener('copy', onCopy); document.removeEventListener('paste', onPaste); };
  }, [paste]);

  // ---------------------------------------------------------------- a run from the canvas

  const { state: runState, conn, follow } = useRunStream(run?.taskId ?? null);
  useEffect(() => { if (run) follow(); }, [run?.taskId]); // eslint-disable-line react-hooks/exhaustive-deps
  const statusKey = runState ? `${run?.taskId}|${runState.waitingNode}|${Object.values(runState.nodes).map((n: any) => `${n.id}:${n.status}`).join(',')}` : '';
  useEffect(() => {
    const d = docRef.current;
    const nodes = d.nodes.map((n) => {
      const status = runState?.nodes[n.id]?.status ?? (run ? 'pending' : undefined);
      const waiting = Boolean(run && runState?.waitingNode === n.id);
      if (n.data.status === status && Boolean(n.data.decide) === waiting) return n;
      const decide = waiting ? async (decision: 'approve' | 'reject') => {
        await api(`/tasks/${enc(run!.taskId)}/approval`, { method: 'POST', body: { decision, node_id: n.id } });
        toast(decision === 'approve' ? 'Approved: the run goes on.' : 'Rejected.', 'ok');
      } : undefined;
      return { ...n, data: { ...n.data, status, decide } };
    });
    if (nodes.some((n, i) => n !== d.nodes[i])) setDoc({ ...d, nodes });
  }, [statusKey]); // eslint-disable-line react-hooks/exhaustive-deps

  // ---------------------------------------------------------------- the side panel

  const selectedNodes = doc.nodes.filter((n) => n.selected);
  const one = selectedNodes.length === 1 ? selectedNodes[0] : null;
  const panelContext = useMemo(() => (one ? { ...context, completions: completions(one.id, dslOf(docRef.current), kindMap) } : context),
    [one?.id, dslRev, context, kindMap]); // eslint-disable-line react-hooks/exhaustive-deps
  const onNodeEdit = useCallback((next: DslNode) => {
    const d = docRef.current;
    setDoc({ ...d, nodes: d.nodes.map((n) => (n.id === next.id ? { ...n, data: { ...n.data, dsl: next } } : n)) }, { dsl: true, undo: `form:${next.id}` });
  }, [setDoc]);
  const onRename = useCallback((to: string) => {
    const from = docRef.current.nodes.find((n) => n.selected)?.id;
    if (from) setDoc(renameNode(docRef.current, from, to), { dsl: true, undo: true });
  }, [setDoc]);
  const taken = useCallback((id: string) => docRef.current.nodes.some((n) => n.id === id), []);

  const pickProblem = useCallback((p: ProblemItem) => {
    const d = docRef.current;
    if (p.edge_index !== undefined && p.edge_index !== null && d.edges[p.edge_index]) { selectOnly(new Set(), new Set([d.edges[p.edge_index].id])); return; }
    const node = p.node_id ? d.nodes.find((n) => n.id === p.node_id) : null;
    if (!node) return;
    selectOnly(new Set([node.id]));
    setTab('node');
    // Bring the node into view when it is not (the view stays where it is when it is).
    const box = canvasBox.current!.getBoundingClientRect();
    const topLeft = flow.flowToScreenPosition(node.position);
    const bottomRight = flow.flowToScreenPosition({ x: node.position.x + NODE_W, y: node.position.y + NODE_H });
    if (topLeft.x < box.left || topLeft.y < box.top || bottomRight.x > box.right || bottomRight.y > box.bottom) {
      flow.setCenter(node.position.x + NODE_W / 2, node.position.y + NODE_H / 2, { zoom: Math.max(flow.getZoom(), 0.8), duration: 200 });
    }
  }, [selectOnly, flow]);

  const dsl = useMemo(() => dslOf(doc), [dslRev]); // eslint-disable-line react-hooks/exhaustive-deps
  const finished = runState?.finished;
  const hasOutput = runState && runState.output !== undefined && runState.output !== null;

  return (
    <div className={`editor${showJson ? ' with-json' : ''}`} data-testid="editor">
      <div className="editor-bar" role="toolbar" aria-label="Workflow">
        <strong className="wf-name" data-testid="workflow-name">{workflow ? workflow.name : 'Unsaved workflow'}</strong>
        {workflow?.version ? <Badge text={`v${workflow.version}`} kind="canary" /> : null}
        {dirty ? <Badge text="unsaved changes" kind="warn" /> : null}
        <span className="sep" />
        <button type="button" onClick={newCanvas} title="An empty canvas">New</button>
        <button type="button" onClick={() => setDialog('open')}>Open…</button>
        <button type="button" className="primary" data-action="save" onClick={requestSave} title="Ctrl+S">Save</button>
        <button type="button" disabled={!workflow} onClick={() => setDialog('versions')}>Versions</button>
        <button type="button" onClick={() => fileInput.current?.click()}>Import</button>
        <input ref={fileInput} type="file" accept=".json,application/json" hidden aria-label="Import DSL file" onChange={async (ev) => {
          const file = ev.target.files?.[0];
          if (file) importText(await file.text(), file.name);
          ev.target.value = '';
        }} />
        <button type="button" onClick={exportDsl}>Export</button>
        <span className="sep" />
        <button type="button" onClick={undo} disabled={!history.current.past.length} title="Ctrl+Z">Undo</button>
        <button type="button" onClick={redo} disabled={!history.current.future.length} title="Ctrl+Y">Redo</button>
        <button type="button" onClick={duplicate} disabled={!selectedNodes.length} title="Ctrl+D">Duplicate</button>
        <button type="button" onClick={autoLayout} disabled={!doc.nodes.length}>Auto-layout</button>
        <button type="button" aria-pressed={showJson} onClick={() => setShowJson(!showJson)}>JSON</button>
        <span className="sep" />
        <button type="button" className="ok solid" data-action="run" onClick={requestRun} title="Ctrl+Enter">Run</button>
      </div>
      <ErrorBox error={loadError} />
      <Palette kinds={kinds} onAdd={(k) => addNode(k)} />
      <div className="canvas" ref={canvasBox} data-testid="canvas" onDragOver={(ev) => { if (ev.dataTransfer.types.includes(KIND_MIME)) { ev.preventDefault(); ev.dataTransfer.dropEffect = 'copy'; } }} onDrop={onDrop}>
        <ReactFlow nodes={doc.nodes} edges={doc.edges} nodeTypes={nodeTypes} onNodesChange={onNodesChange} onEdgesChange={onEdgesChange}
          onConnect={onConnect} onNodeDragStart={() => { history.current.push(docRef.current); setHistoryRev((r) => r + 1); }}
          onNodeClick={(_, n) => { if (run && n.data.status && n.data.status !== 'pending') setTab('run'); }}
          isValidConnection={(c) => c.source !== c.target}
          deleteKeyCode={['Delete', 'Backspace']} multiSelectionKeyCode={['Control', 'Meta', 'Shift']} selectionKeyCode="Shift"
          minZoom={0.1} maxZoom={2}
          defaultEdgeOptions={{ interactionWidth: 16 }} proOptions={{ hideAttribution: true }} aria-label="Workflow canvas">
          <Background gap={20} size={1} />
          <Controls />
          <MiniMap pannable zoomable ariaLabel="Minimap" style={{ width: 150, height: 100 }} />
        </ReactFlow>
        {!doc.nodes.length ? <div className="canvas-hint" aria-hidden="true">Drag a node kind here from the palette, then connect the handles.</div> : null}
        <ProblemList problems={problems} onPick={pickProblem} />
      </div>
      {showJson ? (
        <section className="json-view" aria-label="JSON view">
          <h2>DSL JSON</h2>
          <textarea aria-label="DSL JSON" spellCheck={false} value={jsonText}
            onBlur={() => { if (!jsonError) setJsonText(pretty(dslOf(docRef.current))); }}
            onChange={(ev) => {
              setJsonText(ev.target.value);
              try {
                const parsed = JSON.parse(ev.target.value);
                if (!parsed || typeof parsed !== 'object' || !Array.isArray(parsed.nodes)) throw new Error('a workflow is a JSON object with a `nodes` list');
                setJsonError(null);
                const placed = layoutOf(docRef.current.nodes);
                setDoc(docFromDsl(parsed, kindMap, placed, docRef.current.nodes), { dsl: true, undo: 'json' });
                jsonOrigin.current = dslCounter.current;
              } catch (err: any) { setJsonError(err.message); }
            }} />
          {jsonError ? <div className="error small" role="alert">{jsonError}</div> : <p className="hint small">Edits here change the canvas; the canvas changes this.</p>}
        </section>
      ) : null}
      <aside className="side-panel" data-testid="side-panel" aria-label="Selected node">
        <div className="tabs" role="tablist" aria-label="Side panel">
          <button type="button" role="tab" aria-selected={tab === 'node'} onClick={() => setTab('node')}>Node</button>
          <button type="button" role="tab" aria-selected={tab === 'run'} onClick={() => setTab('run')} disabled={!run}>Run</button>
        </div>
        {tab === 'node' ? (
          one ? (
            <NodePanel node={one.data.dsl} info={kindMap[one.data.dsl.kind]} context={panelContext} taken={taken} onRename={onRename} onChange={onNodeEdit} />
          ) : (
            <div className="muted">
              <p>{selectedNodes.length > 1 ? `${selectedNodes.length} nodes selected: Delete removes them, Ctrl+C copies them as DSL JSON, Ctrl+D duplicates them.` : 'Select a node to edit it.'}</p>
              <p className="small">Keys: Delete · Ctrl+Z / Ctrl+Y · Ctrl+C / Ctrl+V · Ctrl+D · Ctrl+S · Ctrl+Enter runs.</p>
            </div>
          )
        ) : run && runState ? (
          <div data-testid="canvas-run" className="canvas-run">
            <h2>Run <a href={`/console/runs/${enc(run.taskId)}`} onClick={(ev) => { ev.preventDefault(); navigate(`/runs/${enc(run.taskId)}`); }}><code>{run.taskId}</code></a></h2>
            <p><span data-testid="run-status"><Badge text={runState.status} /></span> <span className="muted small">{conn.state === 'open' ? 'live' : conn.state}</span></p>
            {runState.error ? <ErrorBox error={new Error(runState.error)} /> : null}
            {hasOutput ? <><h3>Result</h3><pre className="tokens small" data-testid="final-output">{JSON.stringify(runState.output, null, 2)}</pre></> : finished ? <p className="muted">The run ended without an output.</p> : null}
            {one ? <NodeTrace nodeId={one.id} state={runState} def={one.data.dsl} /> : <p className="muted small">Select a node to follow its tokens and see its trace.</p>}
          </div>
        ) : null}
      </aside>
      {dialog === 'save' ? (
        <Dialog title="Save the workflow" onClose={() => setDialog(null)}>
          <form className="body" onSubmit={async (ev) => {
            ev.preventDefault();
            try { await save(saveName.trim()); setDialog(null); } catch (err: any) { toast(err.message, 'error'); }
          }}>
            <Field label="Workflow name"><input required maxLength={200} autoFocus value={saveName} onChange={(e) => setSaveName(e.target.value)} /></Field>
            <div className="actions"><button type="submit" className="primary" data-action="confirm-save">Save</button><button type="button" onClick={() => setDialog(null)}>Cancel</button></div>
          </form>
        </Dialog>
      ) : null}
      {dialog === 'open' ? <OpenDialog onClose={() => setDialog(null)} onOpen={(id) => { setDialog(null); navigate(`/editor/${enc(id)}`); }} /> : null}
      {dialog === 'versions' && workflow ? (
        <VersionsDialog workflowId={workflow.id} current={dsl} onClose={() => setDialog(null)} onRestore={async (v) => {
          history.current.push(docRef.current);
          setDoc(docFromDsl(v.dsl, kindMap, v.layout, docRef.current.nodes), { dsl: true });
          await save();
        }} />
      ) : null}
      {dialog === 'run' ? <RunDialog dsl={dslOf(docRef.current)} onStart={startRun} onClose={() => setDialog(null)} /> : null}
    </div>
  );
}

export default function EditorPage() {
  return <ReactFlowProvider><Editor /></ReactFlowProvider>;
}
