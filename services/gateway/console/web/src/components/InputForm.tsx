// A task's input as a form generated from the input node's JSON Schema (@rjsf/core, checked by
// ajv): the fields the workflow declares, long text as text areas, errors said per field.

import { forwardRef, useImperativeHandle, useMemo, useRef, useState } from 'react';
import Form from '@rjsf/core';
import validator from '@rjsf/validator-ajv8';
import type { RJSFSchema, UiSchema } from '@rjsf/utils';

const FALLBACK: RJSFSchema = { type: 'object', required: ['text'], properties: { text: { type: 'string', title: 'Text' } } };
const LONG_TEXT = /text|question|prompt|message|content|body/i;

/** Field names as they are in the input (`text`, `topics.0`): what a person or a test can find. */
const plainNames = (path: (string | number)[], idPrefix: string) => (path.length ? path.map(String).join('.') : idPrefix);

function uiFor(schema: RJSFSchema): UiSchema {
  const ui: UiSchema = { 'ui:submitButtonOptions': { norender: true } };
  for (const [name, p] of Object.entries((schema.properties || {}) as Record<string, any>)) {
    if (p && p.type === 'string' && !p.enum && (LONG_TEXT.test(name) || (p.maxLength || 0) > 200)) ui[name] = { 'ui:widget': 'textarea', 'ui:options': { rows: 3 } };
  }
  return ui;
}

export interface InputFormHandle { read(): Record<string, unknown> }

/** `read()` returns the input, or throws when it does not match the schema (the form shows why). */
export const InputForm = forwardRef<InputFormHandle, { schema: Record<string, any> | null }>(function InputForm({ schema }, ref) {
  const effective = (schema && typeof schema === 'object' && schema.properties ? schema : FALLBACK) as RJSFSchema;
  const ui = useMemo(() => uiFor(effective), [effective]);
  const [data, setData] = useState<Record<string, unknown>>({});
  const form = useRef<any>(null);
  const dataRef = useRef(data);
  dataRef.current = data;
  useImperativeHandle(ref, () => ({
    read() {
      if (form.current && !form.current.validateForm()) throw new Error('The input does not match the workflow\'s input schema (see the form).');
      return dataRef.current;
    },
  }), []);
  return (
    <div className="input-form" data-testid="input-form">
      <Form ref={form} schema={effective} uiSchema={ui} validator={validator} formData={data} nameGenerator={plainNames}
        onChange={(e) => setData(e.formData || {})} showErrorList={false} noHtml5Validate tagName="div" />
    </div>
  );
});
