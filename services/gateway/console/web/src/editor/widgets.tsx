// The editor form's own widgets: template text with `{{ node.field }}` completion from upstream
// nodes, the model picker (model aliases), the tool picker (the live tool registry, with each
// tool's description and arguments), the KB picker, JSON Schema editing for the input node.

import { useEffect, useMemo, useRef, useState } from 'react';
import type { FieldProps, WidgetProps } from '@rjsf/utils';

export interface ToolInfo { name: string; description?: string; inputSchema?: any; annotations?: any }
export interface FormContext {
  completions: { name: string; detail: string }[];
  models: string[];
  tools: ToolInfo[] | null;
  kbs: string[] | null;
}

const ctx = (props: { registry: any }): FormContext => props.registry.formContext || { completions: [], models: [], tools: null, kbs: null };

/** The `{{ partial` being typed just before the caret, or null. */
export function openTemplate(text: string, caret: number): { start: number; prefix: string } | null {
  const before = text.slice(0, caret);
  const m = /\{\{\s*([A-Za-z0-9_.-]*)$/.exec(before);
  return m ? { start: caret - m[1].length, prefix: m[1] } : null;
}

/** Insert a completion at the caret: the partial name replaced, the `}}` added when missing. */
export function applyCompletion(text: string, caret: number, name: string): { text: string; caret: number } {
  const open = openTemplate(text, caret);
  if (!open) return { text, caret };
  const after = text.slice(caret);
  const close = /^\s*\}\}/.test(after) ? '' : ' }}';
  const inserted = `${name}${close}`;
  return { text: text.slice(0, open.start) + inserted + after, caret: open.start + inserted.length };
}

export function TemplateWidget(props: WidgetProps) {
  const { id, value, onChange, label, required, disabled, readonly } = props;
  const { completions } = ctx(props);
  const ref = useRef<HTMLTextAreaElement>(null);
  const [open, setOpen] = useState<{ start: number; prefix: string } | null>(null);
  const [active, setActive] = useState(0);
  const matches = useMemo(() => (open ? completions.filter((c) => c.name.startsWith(open.prefix) || c.name.includes(open.prefix)).slice(0, 12) : []), [open, completions]);
  const text = value ?? '';
  const check = () => { const el = ref.current; if (el) { setOpen(openTemplate(el.value, el.selectionStart)); setActive(0); } };
  const choose = (name: string) => {
    const el = ref.current!;
    const next = applyCompletion(el.value, el.selectionStart, name);
    onChange(next.text);
    setOpen(null);
    requestAnimationFrame(() => { el.focus(); el.setSelectionRange(next.caret, next.caret); });
  };
  const listId = `${id}-completions`;
  return (
    <div className="template-field">
      <textarea id={id} ref={ref} className="form-control template" rows={String(text).includes('\n') || String(text).length > 60 ? 4 : 2}
        value={text} required={required} disabled={disabled} readOnly={readonly} aria-label={label} spellCheck={false}
        role="combobox" aria-expanded={matches.length > 0} aria-controls={listId} aria-autocomplete="list"
        onChange={(e) => { onChange(e.target.value === '' ? (required ? '' : undefined) : e.target.value); requestAnimationFrame(check); }}
        onKeyUp={(e) => { if (!['ArrowUp', 'ArrowDown', 'Enter', 'Tab', 'Escape'].includes(e.key)) check(); }}
        onBlur={() => setTimeout(() => setOpen(null), 150)}
        onKeyDown={(e) => {
          if (!matches.length) return;
          if (e.key === 'ArrowDown') { e.preventDefault(); setActive((active + 1) % matches.length); }
          else if (e.key === 'ArrowUp') { e.preventDefault(); setActive((active - 1 + matches.length) % matches.length); }
          else if (e.key === 'Enter' || e.key === 'Tab') { e.preventDefault(); choose(matches[active].name); }
          else if (e.key === 'Escape') { e.preventDefault(); setOpen(null); }
        }} />
      {matches.length ? (
        <ul className="completions" role="listbox" id={listId} aria-label="Upstream outputs">
          {matches.map((c, i) => (
            <li key={c.name} role="option" aria-selected={i === active} onMouseDown={(e) => { e.preventDefault(); choose(c.name); }}>
              <code>{c.name}</code> <span className="muted small">{c.detail}</span>
            </li>
          ))}
        </ul>
      ) : null}
    </div>
  );
}

export function ModelWidget(props: WidgetProps) {
  const { id, value, onChange, label } = props;
  const { models } = ctx(props);
  const names = [...new Set([...(models || []), ...(value ? [value] : [])])];
  return (
    <select id={id} className="form-control" aria-label={label} value={value ?? ''} onChange={(e) => onChange(e.target.value || undefined)}>
      <option value="">Default (the failover chain)</option>
      {names.map((n) => <option key={n} value={n}>{n}</option>)}
    </select>
  );
}

export function KbWidget(props: WidgetProps) {
  const { id, value, onChange, label, required } = props;
  const { kbs } = ctx(props);
  const listId = `${id}-kbs`;
  return (
    <>
      <input id={id} className="form-control" list={listId} aria-label={label} required={required} value={value ?? ''} placeholder="knowledge base name or {{ template }}"
        onChange={(e) => onChange(e.target.value)} />
      <datalist id={listId}>{(kbs || []).map((k) => <option key={k} value={k} />)}</datalist>
    </>
  );
}

function argsOf(tool: ToolInfo | undefined): string {
  const props = tool?.inputSchema?.properties || {};
  const required = new Set(tool?.inputSchema?.required || []);
  const names = Object.entries<any>(props).map(([n, p]) => `${n}${required.has(n) ? '' : '?'}: ${p?.type || 'any'}`);
  return names.length ? names.join(', ') : 'no arguments';
}

export function ToolWidget(props: WidgetProps) {
  const { id, value, onChange, label } = props;
  const { tools } = ctx(props);
  const known = (tools || []).find((t) => t.name === value);
  return (
    <div>
      <select id={id} className="form-control" aria-label={label} value={value ?? ''} onChange={(e) => onChange(e.target.value)}>
        <option value="">{tools === null ? 'Loading the tool registry…' : 'Choose a tool…'}</option>
        {value && !known ? <option value={value}>{value} (not in the registry)</option> : null}
        {(tools || []).map((t) => <option key={t.name} value={t.name}>{t.name}</option>)}
      </select>
      {known ? <p className="hint small" data-testid="tool-help">{known.description || ''} <code>({argsOf(known)})</code></p> : null}
    </div>
  );
}

/** An agent's `tools`: none, "auto" (every agent-visible tool), or a chosen list. */
export function ToolsField(props: FieldProps) {
  const { formData, onChange, idSchema, fieldPathId } = props as any;
  const id = (fieldPathId?.$id ?? idSchema?.$id ?? 'tools') as string;
  const { tools } = ctx(props as any);
  const mode = formData === 'auto' ? 'auto' : Array.isArray(formData) ? 'list' : 'none';
  const chosen = new Set<string>(Array.isArray(formData) ? formData : []);
  const set = (v: unknown) => onChange(v, fieldPathId?.path ?? []);
  return (
    <fieldset className="tools-field" id={id}>
      <legend>Tools</legend>
      <select aria-label="Tools" value={mode} onChange={(e) => set(e.target.value === 'auto' ? 'auto' : e.target.value === 'list' ? [] : undefined)}>
        <option value="none">None (no tools)</option>
        <option value="auto">Every agent-visible tool (auto)</option>
        <option value="list">These tools…</option>
      </select>
      {mode === 'list' ? (
        <ul className="tool-list">
          {(tools || []).map((t) => (
            <li key={t.name}><label>
              <input type="checkbox" checked={chosen.has(t.name)} onChange={(e) => set(e.target.checked ? [...chosen, t.name] : [...chosen].filter((n) => n !== t.name))} />
              {' '}<code>{t.name}</code> <span className="muted small">{t.description} ({argsOf(t)})</span>
            </label></li>
          ))}
          {tools === null ? <li className="muted">Loading the tool registry…</li> : null}
        </ul>
      ) : null}
    </fieldset>
  );
}

/** JSON edited as text: the value changes when the text parses (and, for a schema, is an object). */
function JsonText({ id, label, value, onChange, hint, objectOnly }: { id: string; label: string; value: unknown; onChange: (v: unknown) => void; hint: string; objectOnly: boolean }) {
  const shown = value === undefined ? '' : JSON.stringify(value, null, 2);
  const [text, setText] = useState(shown);
  const [error, setError] = useState<string | null>(null);
  const focused = useRef(false);
  useEffect(() => { if (!focused.current) { setText(shown); setError(null); } }, [shown]);
  return (
    <div className="field">
      <label htmlFor={id}>{label}</label>
      <textarea id={id} rows={Math.min(14, Math.max(4, text.split('\n').length))} spellCheck={false} value={text}
        onFocus={() => { focused.current = true; }} onBlur={() => { focused.current = false; if (!error) setText(shown); }}
        onChange={(e) => {
          setText(e.target.value);
          if (!e.target.value.trim()) { setError(null); onChange(undefined); return; }
          try {
            const parsed = JSON.parse(e.target.value);
            if (objectOnly && (!parsed || typeof parsed !== 'object' || Array.isArray(parsed))) throw new Error('a JSON Schema is an object');
            setError(null);
            onChange(parsed);
          } catch (err: any) { setError(err.message); }
        }} aria-invalid={error ? 'true' : undefined} />
      {error ? <div className="error small" role="alert">{error}</div> : <div className="hint">{hint}</div>}
    </div>
  );
}

export function JsonSchemaField(props: FieldProps) {
  const { formData, onChange, fieldPathId, idSchema } = props as any;
  return <JsonText id={(fieldPathId?.$id ?? idSchema?.$id ?? 'schema') as string} label="Input schema (JSON Schema)" value={formData} objectOnly
    onChange={(v) => onChange(v, fieldPathId?.path ?? [])} hint={'What a run must be given: {"type": "object", "properties": {…}, "required": […]}'} />;
}

/** An output's `value`: a template, or (written as JSON starting with { or [) any JSON value. */
export function TemplateValueField(props: FieldProps) {
  const { formData, onChange, fieldPathId, idSchema, registry } = props as any;
  const id = (fieldPathId?.$id ?? idSchema?.$id ?? 'value') as string;
  if (formData !== undefined && typeof formData !== 'string') {
    return <JsonText id={id} label="Value (JSON)" value={formData} objectOnly={false} onChange={(v) => onChange(v, fieldPathId?.path ?? [])} hint="Its string leaves are templates." />;
  }
  return (
    <div className="field">
      <label htmlFor={id}>Value<span className="required">*</span></label>
      <TemplateWidget {...({ id, value: formData, required: true, label: 'Value', registry, onChange: (v: unknown) => onChange(v, fieldPathId?.path ?? []) } as any)} />
    </div>
  );
}

export const widgets = { template: TemplateWidget, model: ModelWidget, kb: KbWidget, tool: ToolWidget };
export const fields = { tools: ToolsField, jsonSchema: JsonSchemaField, templateValue: TemplateValueField };
