// Start a run: a DSL pasted, uploaded from a file or picked from the saved workflows, an input
// form built from the input node's JSON Schema, options, then POST /tasks (idempotent).

import { useEffect, useMemo, useRef, useState } from 'react';
import { Link, useNavigate } from 'react-router-dom';
import { api, idempotencyKey } from '../lib/api';
import { inputSchema, type Dsl } from '../lib/dsl';
import { Badge, BusyButton, Empty, ErrorBox, Field, PageHead, Select, toast, useTitle } from '../components/ui';
import { InputForm, type InputFormHandle } from '../components/InputForm';
import { RunGraph } from '../graph/RunGraph';

export const DSL_CACHE = 'agentix.dsl.';

const EXAMPLE = {
  version: '1',
  nodes: [
    { id: 'in', kind: 'input', label: 'Question', config: { schema: { type: 'object', required: ['text'], properties: { text: { type: 'string', title: 'Question' } } } } },
    { id: 'ans', kind: 'agent', label: 'Answer', config: { system: 'You are a concise assistant.', prompt: 'Answer briefly: {{ in.text }}' } },
    { id: 'out', kind: 'output', config: { value: '{{ ans.output }}' } },
  ],
  edges: [{ source: 'in', target: 'ans' }, { source: 'ans', target: 'out' }],
};

/** Submit a task and go to its run page (the DSL kept for the run graph). */
export async function startTask(body: Record<string, unknown>, key: string, dsl: Dsl | null): Promise<string> {
  const out = await api('/tasks', { method: 'POST', body, headers: { 'Idempotency-Key': key } });
  try { if (dsl) sessionStorage.setItem(DSL_CACHE + out.id, JSON.stringify(dsl)); } catch { /* the viewer can do without */ }
  return out.id;
}

type Source = 'paste' | 'upload' | 'saved';

export default function SubmitPage() {
  useTitle('New run');
  const navigate = useNavigate();
  const [source, setSource] = useState<Source>('paste');
  const [text, setText] = useState('');
  const [dsl, setDsl] = useState<Dsl | null>(null);
  const [parseError, setParseError] = useState<unknown>(null);
  const [validation, setValidation] = useState<{ ok?: any; error?: unknown } | null>(null);
  const [failed, setFailed] = useState<Record<string, string>>({});
  const [workflowId, setWorkflowId] = useState<string | null>(null);
  const [workflows, setWorkflows] = useState<[string, string][] | null>(null);
  const [raw, setRaw] = useState(false);
  const [rawInput, setRawInput] = useState('{}');
  const [budget, setBudget] = useState('');
  const [timeout, setTimeoutS] = useState('');
  const [model, setModel] = useState('');
  const [problem, setProblem] = useState<unknown>(null);
  const key = useMemo(() => idempotencyKey(), []); // one per form: a double click never starts two runs
  const form = useRef<InputFormHandle>(null);
  const tabs = useRef<Record<string, HTMLButtonElement | null>>({});

  const parsedText = useRef<string | null>(null);
  const parse = (value: string) => {
    const t = value.trim();
    if (t === parsedText.current && dsl) return dsl; // parsed already: what was said about it stays
    parsedText.current = t;
    setValidation(null);
    setFailed({});
    if (!t) { setDsl(null); setParseError(null); return null; }
    try {
      const parsed = JSON.parse(t);
      if (!parsed || typeof parsed !== 'object' || Array.isArray(parsed)) throw new Error('the DSL must be a JSON object');
      setDsl(parsed);
      setParseError(null);
      return parsed;
    } catch (err: any) {
      setDsl(null);
      parsedText.current = null;
      setParseError(new Error(`Not valid JSON: ${err.message}`));
      return null;
    }
  };
  useEffect(() => { const t = setTimeout(() => parse(text), 300); return () => clearTimeout(t); }, [text]); // eslint-disable-line react-hooks/exhaustive-deps

  const loadWorkflows = async () => {
    try {
      const page = await api('/workflows', { query: { limit: 200 } });
      const items = page.items || [];
      setWorkflows([['', items.length ? 'Pick a workflow…' : 'No saved workflow'], ...items.map((w: any) => [w.id, w.name || w.id] as [string, string])]);
    } catch (err: any) {
      setWorkflows([['', `Could not load workflows: ${err.message}`]]);
    }
  };
  useEffect(() => { loadWorkflows(); }, []);

  const showTab = (id: Source) => { setSource(id); if (id !== 'saved') setWorkflowId(null); };
  const schemaKey = JSON.stringify(inputSchema(dsl));
  const schema = useMemo(() => inputSchema(dsl), [schemaKey]); // eslint-disable-line react-hooks/exhaustive-deps
  const tabList: [Source, string][] = [['paste', 'Paste'], ['upload', 'Upload file'], ['saved', 'Saved workflow']];

  return (
    <>
      <PageHead title="New run"><Link to="/runs">All runs</Link><Link className="button primary" to="/editor">Draw on the canvas</Link></PageHead>
      <form aria-label="Start a run" onSubmit={(ev) => ev.preventDefault()}>
        <div className="grid-2">
          <section className="panel" aria-labelledby="sub-dsl">
            <h2 id="sub-dsl">Workflow</h2>
            <div className="tabs" role="tablist" aria-label="Where the workflow comes from">
              {tabList.map(([id, label], i) => (
                <button key={id} type="button" role="tab" id={`tab-${id}`} aria-controls={`panel-${id}`} aria-selected={source === id}
                  ref={(el) => { tabs.current[id] = el; }}
                  onClick={() => showTab(id)}
                  onKeyDown={(ev) => {
                    const step = ({ ArrowRight: 1, ArrowLeft: -1 } as Record<string, number>)[ev.key];
                    if (!step) return;
                    const next = tabList[(i + step + tabList.length) % tabList.length][0];
                    tabs.current[next]?.focus();
                    showTab(next);
                  }}>{label}</button>
              ))}
            </div>
            <div role="tabpanel" id="panel-paste" aria-labelledby="tab-paste" hidden={source !== 'paste'}>
              <textarea rows={14} spellCheck={false} aria-label="Workflow DSL (JSON)" placeholder='{"version": "1", "nodes": [...], "edges": [...]}' value={text} onChange={(e) => setText(e.target.value)} />
              <div className="actions"><button type="button" onClick={() => { const t = JSON.stringify(EXAMPLE, null, 2); setText(t); parse(t); }}>Insert example</button></div>
            </div>
            <div role="tabpanel" id="panel-upload" aria-labelledby="tab-upload" hidden={source !== 'upload'}>
              <Field label="DSL file (.json)" hint="The file is read in the browser; its text appears under “Paste”.">
                <input type="file" accept=".json,application/json" aria-label="DSL file" onChange={async (ev) => {
                  const file = ev.target.files?.[0];
                  if (!file) return;
                  if (file.size > 1024 * 1024) { setParseError(new Error('The file is larger than 1 MiB, the DSL limit.')); return; }
                  const t = await file.text();
                  setText(t);
                  parse(t);
                  showTab('paste');
                  toast(`Loaded ${file.name}.`, 'ok');
                }} />
              </Field>
            </div>
            <div role="tabpanel" id="panel-saved" aria-labelledby="tab-saved" hidden={source !== 'saved'}>
              <Field label="Workflow"><Select aria-label="Saved workflow" value={workflowId || ''} options={workflows || [['', 'Loading saved workflows…']]} onChange={async (ev) => {
                const wid = ev.target.value;
                if (!wid) { setWorkflowId(null); setDsl(null); return; }
                try {
                  const wf = await api(`/workflows/${encodeURIComponent(wid)}`);
                  setWorkflowId(wf.id);
                  setText(JSON.stringify(wf.dsl, null, 2));
                  setDsl(wf.dsl);
                } catch (err) { setValidation({ error: err }); }
              }} /></Field>
            </div>
            <div className="actions">
              <BusyButton action={async () => {
                const parsed = parse(text);
                if (!parsed) return;
                try {
                  const out = await api('/dsl/validate', { method: 'POST', body: parsed });
                  setValidation({ ok: out });
                } catch (err: any) {
                  setValidation({ error: err });
                  // Point at the nodes the errors name.
                  setFailed(Object.fromEntries((err.errors || []).filter((e: any) => e.node_id).map((e: any) => [e.node_id, 'failed'])));
                }
              }}>Validate</BusyButton>
              <BusyButton action={async () => {
                const parsed = parse(text);
                if (!parsed) return;
                const name = window.prompt('Name of the saved workflow');
                if (!name) return;
                try {
                  const wf = await api('/workflows', { method: 'POST', body: { name, dsl: parsed } });
                  toast(`Saved as ${wf.name || name}.`, 'ok');
                  loadWorkflows();
                } catch (err) { setValidation({ error: err }); }
              }}>Save as workflow</BusyButton>
            </div>
            <div aria-live="polite">
              <ErrorBox error={parseError} />
              {validation?.error ? <ErrorBox error={validation.error} /> : null}
              {validation?.ok ? (
                <div className="notice ok"><Badge text="valid" kind="ok" /> The workflow is valid.
                  {(validation.ok.warnings || []).length ? <ul>{validation.ok.warnings.map((w: any, i: number) => <li key={i}>{typeof w === 'string' ? w : `${w.code || ''} ${w.node_id ? `(${w.node_id})` : ''} ${w.message || ''}`}</li>)}</ul> : null}
                </div>
              ) : null}
            </div>
          </section>
          <section className="panel" aria-labelledby="sub-in">
            <h2 id="sub-in">Input</h2>
            <div hidden={raw}><InputForm key={schemaKey} ref={form} schema={schema} /></div>
            <div className="field inline"><input type="checkbox" id="raw-input" checked={raw} onChange={(e) => {
              if (e.target.checked) { try { setRawInput(JSON.stringify(form.current?.read() ?? {}, null, 2)); } catch { /* keep what is there */ } }
              setRaw(e.target.checked);
            }} /><label htmlFor="raw-input">Edit the input as JSON</label></div>
            {raw ? <textarea rows={5} aria-label="Input as JSON" value={rawInput} onChange={(e) => setRawInput(e.target.value)} /> : null}
            <fieldset><legend>Options</legend>
              <div className="form-grid">
                <Field label="Token budget"><input type="number" min={1} placeholder="default" value={budget} onChange={(e) => setBudget(e.target.value)} /></Field>
                <Field label="Timeout (s)"><input type="number" min={1} placeholder="default" value={timeout} onChange={(e) => setTimeoutS(e.target.value)} /></Field>
                <Field label="Model alias"><input placeholder="active chain" value={model} onChange={(e) => setModel(e.target.value)} /></Field>
              </div>
            </fieldset>
            <ErrorBox error={problem} />
            <div className="actions">
              <BusyButton className="primary" data-action="submit-run" action={async () => {
                setProblem(null);
                try {
                  const parsed = source !== 'saved' || !workflowId ? parse(text) : dsl;
                  if (!parsed && !workflowId) throw new Error('Give a workflow first: paste it, upload a file or pick a saved one.');
                  const input = raw ? JSON.parse(rawInput || '{}') : form.current!.read();
                  const options: Record<string, unknown> = {};
                  if (budget) options.token_budget = Number(budget);
                  if (timeout) options.timeout_s = Number(timeout);
                  if (model.trim()) options.model = model.trim();
                  const body = workflowId && source === 'saved' ? { workflow_id: workflowId } : { dsl: parsed };
                  const id = await startTask({ ...body, input, options }, key, parsed);
                  navigate(`/runs/${encodeURIComponent(id)}`);
                } catch (err) { setProblem(err); }
              }}>Start run</BusyButton>
            </div>
          </section>
        </div>
        <section className="panel" aria-labelledby="sub-graph"><h2 id="sub-graph">Graph</h2>
          <div data-testid="preview">
            {dsl ? <RunGraph dsl={dsl} statuses={failed} label="Workflow preview" /> : <Empty message="Paste, upload or pick a workflow to see its graph." />}
          </div>
        </section>
      </form>
    </>
  );
}
