// A node's form is generated from its kind's config schema: the fields are there, an edit
// changes only what was typed (defaults stay out of the DSL), and the id is renamed only to a
// free, valid one.

import { afterEach, expect, test, vi } from 'vitest';
import { cleanup, fireEvent, render } from '@testing-library/react';
import { NodePanel } from '../editor/NodePanel';
import type { KindInfo } from '../lib/dsl';

afterEach(cleanup);

// The shape GET /dsl/kinds answers for `agent` (shared/contract/kinds.py, from AgentConfig).
const agent: KindInfo = {
  kind: 'agent', label: 'Agent', description: 'A model answers a prompt.', icon: '✦', inputs: 1, outputs: [''],
  case_handles: false, default_handle: null, outputs_doc: { output: 'the final text' },
  config_schema: {
    type: 'object', title: 'AgentConfig', required: ['prompt'],
    properties: {
      timeout_s: { anyOf: [{ type: 'number', exclusiveMinimum: 0 }, { type: 'null' }], default: null, title: 'Timeout S' },
      on_error: { enum: ['fail', 'continue'], type: 'string', default: 'fail', title: 'On Error' },
      prompt: { type: 'string', title: 'Prompt' },
      model: { anyOf: [{ type: 'string' }, { type: 'null' }], default: null, title: 'Model' },
      tools: { anyOf: [{ type: 'array', items: { type: 'string' } }, { const: 'auto', type: 'string' }, { type: 'null' }], default: null, title: 'Tools' },
      max_steps: { type: 'integer', default: 8, minimum: 1, maximum: 50, title: 'Max Steps' },
    },
  },
};
const context = { completions: [{ name: 'in.text', detail: 'the question' }], models: ['gpt', 'offline'], tools: [], kbs: [] };

test('the form has the kind\'s fields and an edit writes only what was typed', () => {
  const changed = vi.fn();
  const { getByLabelText, container } = render(
    <NodePanel node={{ id: 'ans', kind: 'agent', config: {} }} info={agent} context={context} taken={() => false} onRename={() => {}} onChange={changed} />);
  const prompt = getByLabelText('Prompt') as HTMLTextAreaElement;
  expect(getByLabelText('Max Steps')).toBeTruthy();
  expect([...container.querySelectorAll('select option')].map((o) => o.textContent)).toContain('gpt'); // the model picker
  expect(container.textContent).not.toContain('Tools option'); // the tools field is the editor's own, alone
  fireEvent.change(prompt, { target: { value: 'Answer {{ in.text }}' } });
  const last = changed.mock.calls.at(-1)![0];
  expect(last).toEqual({ id: 'ans', kind: 'agent', config: { prompt: 'Answer {{ in.text }}' } });
});

test('an id is renamed only to a free and valid one', () => {
  const renamed = vi.fn();
  const { getByLabelText, getByRole } = render(
    <NodePanel node={{ id: 'ans', kind: 'agent', config: { prompt: 'x' } }} info={agent} context={context}
      taken={(id) => id === 'other'} onRename={renamed} onChange={() => {}} />);
  const id = getByLabelText('Id') as HTMLInputElement;
  fireEvent.change(id, { target: { value: 'other' } });
  expect(getByRole('alert').textContent).toContain('Another node');
  fireEvent.keyDown(id, { key: 'Enter' });
  fireEvent.change(id, { target: { value: 'bad id!' } });
  fireEvent.keyDown(id, { key: 'Enter' });
  expect(renamed).not.toHaveBeenCalled();
  fireEvent.change(id, { target: { value: 'answer' } });
  fireEvent.keyDown(id, { key: 'Enter' });
  expect(renamed).toHaveBeenCalledWith('answer');
});
