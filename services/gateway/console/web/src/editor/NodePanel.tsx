// The side panel of the selected node: its id and label, and the form of its kind generated
// from the kind's config schema (@rjsf/core) with the editor's widgets.

import { memo, useEffect, useMemo, useState } from 'react';
import Form from '@rjsf/core';
import validator from '@rjsf/validator-ajv8';
import type { DslNode, KindInfo } from '../lib/dsl';
import { cleanConfig, formSchema, uiSchemaFor } from './schema';
import { fields, widgets, type FormContext } from './widgets';

const ID_PATTERN = /^[A-Za-z0-9_-]{1,64}$/;

function IdField({ id, taken, onRename }: { id: string; taken: (id: string) => boolean; onRename: (to: string) => void }) {
  const [value, setValue] = useState(id);
  useEffect(() => setValue(id), [id]);
  const problem = value === id ? null : !ID_PATTERN.test(value) ? 'Use 1-64 characters of A-Z a-z 0-9 _ -.' : taken(value) ? `Another node is named ${value}.` : null;
  const commit = () => { if (value !== id && !problem) onRename(value); };
  return (
    <div className="field">
      <label htmlFor="node-id">Id</label>
      <input id="node-id" value={value} spellCheck={false} autoComplete="off" aria-invalid={problem ? 'true' : undefined}
        onChange={(e) => setValue(e.target.value)} onBlur={commit}
        onKeyDown={(e) => { if (e.key === 'Enter') { e.preventDefault(); commit(); } if (e.key === 'Escape') setValue(id); }} />
      {problem ? <div className="error small" role="alert">{problem}</div> : <div className="hint">what templates call it: {`{{ ${id}.output }}`}</div>}
    </div>
  );
}

export const NodePanel = memo(function NodePanel({ node, info, context, taken, onRename, onChange }: {
  node: DslNode; info: KindInfo | undefined; context: FormContext;
  taken: (id: string) => boolean; onRename: (to: string) => void; onChange: (next: DslNode) => void;
}) {
  const [schema, ui] = useMemo(() => {
    if (!info) return [null, {}];
    const s = { ...formSchema(info.config_schema), title: undefined };
    const u = uiSchemaFor(node.kind, s);
    // A field with a widget of the editor's own (tools, the input schema, an output's value) is
    // drawn by it alone: rjsf would add a selector of the schema's alternatives below it.
    s.properties = Object.fromEntries(Object.entries<any>(s.properties || {}).map(([name, p]) => (
      (u[name] as any)?.['ui:field'] ? [name, { title: p.title, description: p.description }] : [name, p])));
    return [s, u];
  }, [info, node.kind]);
  const config = node.config || {};
  return (
    <div className="node-form" data-testid="node-form" data-node={node.id}>
      <h2><span aria-hidden="true">{info?.icon}</span> {info?.label || node.kind} <code>{node.id}</code></h2>
      {info ? <p className="muted small">{info.description}</p> : null}
      <IdField id={node.id} taken={taken} onRename={onRename} />
      <div className="field">
        <label htmlFor="node-label">Label</label>
        <input id="node-label" value={String(node.label ?? '')} placeholder="shown on the canvas instead of the id"
          onChange={(e) => {
            const { label: _old, ...rest } = node;
            onChange(e.target.value ? { ...node, label: e.target.value } : (rest as DslNode));
          }} />
      </div>
      {schema ? (
        <Form key={`${node.id}:${node.kind}`} schema={schema} uiSchema={ui} validator={validator} formData={config}
          widgets={widgets} fields={fields} formContext={context} tagName="div" idPrefix={`cfg-${node.id}`}
          showErrorList={false} noHtml5Validate liveOmit={false}
          experimental_defaultFormStateBehavior={{ emptyObjectFields: 'skipDefaults' } as any}
          onChange={(e) => {
            const next = cleanConfig(e.formData || {});
            if (JSON.stringify(next) === JSON.stringify(config)) return;
            onChange({ ...node, config: next });
          }} />
      ) : <p className="muted">Unknown kind {node.kind}: edit it in the JSON view.</p>}
    </div>
  );
});
