// The form of a node kind, from its config JSON Schema (GET /dsl/kinds, generated from the
// validator's models). Only the presentation changes here: an optional field (`X | null`) is
// shown as X, defaults are said in the field's help instead of being written into the config
// (a node keeps only what a person set), and template, model, tool, KB and schema fields get
// their own widgets.

import type { RJSFSchema, UiSchema } from '@rjsf/utils';

const TEMPLATE_FIELDS = new Set(['prompt', 'system', 'goal', 'message', 'query', 'condition', 'items', 'history', 'plan', 'when']);
const MODEL_FIELDS = new Set(['model', 'lead_model']);
const COMMON_LAST = ['timeout_s', 'on_error'];

function describeDefault(s: any): string | undefined {
  if (s.default === undefined || s.default === null) return s.description;
  const said = `default: ${JSON.stringify(s.default)}`;
  return s.description ? `${s.description} (${said})` : said;
}

/** `X | null` as X; defaults moved into the description; recursively, $defs included. */
export function formSchema(schema: any): any {
  if (Array.isArray(schema)) return schema.map(formSchema);
  if (!schema || typeof schema !== 'object') return schema;
  let s = { ...schema };
  const options = s.anyOf;
  if (Array.isArray(options)) {
    const real = options.filter((o: any) => !(o && o.type === 'null'));
    if (real.length === 1 && real.length < options.length) {
      const { anyOf: _drop, ...rest } = s;
      s = { ...real[0], ...rest };
    }
  }
  const description = describeDefault(s);
  delete s.default;
  if (description) s.description = description;
  for (const key of ['properties', '$defs']) {
    if (s[key]) s[key] = Object.fromEntries(Object.entries(s[key]).map(([k, v]) => [k, formSchema(v)]));
  }
  for (const key of ['items', 'additionalProperties']) if (s[key] && typeof s[key] === 'object') s[key] = formSchema(s[key]);
  for (const key of ['anyOf', 'oneOf']) if (Array.isArray(s[key])) s[key] = s[key].map(formSchema);
  return s;
}

function uiForObject(schema: any, kind: string, root: boolean): UiSchema {
  const ui: UiSchema = {};
  const props = schema?.properties || {};
  for (const [name, p] of Object.entries<any>(props)) {
    if (TEMPLATE_FIELDS.has(name) && (p.type === 'string' || !p.type)) ui[name] = { 'ui:widget': 'template' };
    else if (MODEL_FIELDS.has(name)) ui[name] = { 'ui:widget': 'model' };
    else if (name === 'kb') ui[name] = { 'ui:widget': 'kb' };
    else if (name === 'tool' && p.type === 'string') ui[name] = { 'ui:widget': 'tool' };
    else if (name === 'tools' && root && kind === 'agent') ui[name] = { 'ui:field': 'tools' };
    else if (name === 'schema' && kind === 'input') ui[name] = { 'ui:field': 'jsonSchema' };
    else if (name === 'value' && kind === 'output') ui[name] = { 'ui:field': 'templateValue' };
    else if (name === 'models' && p.type === 'array') ui[name] = { items: { 'ui:widget': 'model' } };
    else if (name === 'cases' && p.type === 'array') ui[name] = { items: { when: { 'ui:widget': 'template' } } };
  }
  if (root) {
    if (props.timeout_s) ui.timeout_s = { 'ui:title': 'Timeout (s)' };
    if (props.on_error) ui.on_error = { 'ui:title': 'On error' };
    const names = Object.keys(props);
    ui['ui:order'] = [...names.filter((n) => !COMMON_LAST.includes(n)), ...COMMON_LAST.filter((n) => names.includes(n)), '*'];
  }
  return ui;
}

export function uiSchemaFor(kind: string, schema: RJSFSchema): UiSchema {
  return { ...uiForObject(schema, kind, true), 'ui:submitButtonOptions': { norender: true } };
}

/** The config without members left undefined by the form (so the exported JSON stays as set). */
export function cleanConfig(value: any): any {
  if (Array.isArray(value)) return value.map(cleanConfig);
  if (!value || typeof value !== 'object') return value;
  return Object.fromEntries(Object.entries(value).filter(([, v]) => v !== undefined).map(([k, v]) => [k, cleanConfig(v)]));
}
