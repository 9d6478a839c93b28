// The editor's document: every example imports and exports to identical DSL; renames carry the
// edges; pasted fragments get fresh ids; completions name upstream outputs only; the form schema
// shows `X | null` as X and keeps defaults out of the config.

import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { expect, test } from 'vitest';
import { addFragment, docFromDsl, dslOf, emptyDoc, parseFragment, renameNode, selectedFragment } from '../editor/doc';
import { History } from '../editor/history';
import { cleanConfig, formSchema } from '../editor/schema';
import { applyCompletion, openTemplate } from '../editor/widgets';
import { completions, sourceHandles, type Dsl } from '../lib/dsl';

const EXAMPLES = join(__dirname, '../../../../../../examples');
const examples = readdirSync(EXAMPLES).filter((f) => f.endsWith('.json'));
const load = (name: string): Dsl => JSON.parse(readFileSync(join(EXAMPLES, name), 'utf8'));

test.each(examples)('%s imports and exports to identical DSL', (name) => {
  const original = load(name);
  const doc = docFromDsl(original, {});
  expect(JSON.stringify(dslOf(doc))).toBe(JSON.stringify(original));
  expect(doc.nodes.every((n) => Number.isFinite(n.position.x) && Number.isFinite(n.position.y))).toBe(true);
});

test('a rename carries its edges and keeps the member order', () => {
  const doc = renameNode(docFromDsl(load('branch_fanout.json'), {}), 'route', 'decide');
  const dsl = dslOf(doc);
  expect(dsl.nodes[1]).toEqual({ id: 'decide', kind: 'branch', config: { condition: "'?' in in.text" } });
  expect(Object.keys(dsl.edges[1])).toEqual(['source', 'target', 'sourceHandle']);
  expect(dsl.edges.filter((e) => e.source === 'decide' || e.target === 'decide')).toHaveLength(4);
  expect(dsl.edges.some((e) => e.source === 'route' || e.target === 'route')).toBe(false);
});

test('a pasted fragment gets fresh ids where they are taken, and its edges follow', () => {
  const doc = docFromDsl(load('hello.json'), {});
  doc.nodes = doc.nodes.map((n) => ({ ...n, selected: n.id !== 'in' }));
  const fragment = selectedFragment(doc)!;
  expect(fragment.nodes.map((n) => n.id)).toEqual(['ans', 'out']);
  expect(fragment.edges).toEqual([{ source: 'ans', target: 'out' }]);
  const pasted = addFragment(doc, parseFragment(JSON.stringify(fragment))!, {}, { x: 0, y: 0 });
  const dsl = dslOf(pasted);
  expect(dsl.nodes.map((n) => n.id)).toEqual(['in', 'ans', 'out', 'ans_2', 'out_2']);
  expect(dsl.edges.at(-1)).toEqual({ source: 'ans_2', target: 'out_2' });
  expect(pasted.nodes.filter((n) => n.selected).map((n) => n.id)).toEqual(['ans_2', 'out_2']);
  expect(parseFragment('not json')).toBeNull();
  expect(parseFragment('{"nodes": [{"id": 1}]}')).toBeNull();
});

test('undo and redo restore the edge a change removed', () => {
  const history = new History();
  const before = docFromDsl(load('hello.json'), {});
  history.push(before);
  const after = { ...before, edges: before.edges.slice(1) };
  const undone = history.undo(after)!;
  expect(dslOf(undone).edges).toEqual(load('hello.json').edges);
  expect(dslOf(history.redo(undone)!).edges).toEqual([{ source: 'ans', target: 'out' }]);
  expect(history.redo(undone)).toBeNull();
});

test('completions are the outputs of upstream nodes only, with the input schema\'s fields', () => {
  const dsl = load('branch_fanout.json');
  const names = completions('merge', dsl, { agent: { outputs_doc: { output: 'the text' } } as any }).map((c) => c.name);
  expect(names).toEqual(['in.text', 'route.output', 'facts.output', 'risks.output']);
  expect(completions('in', dsl, {})).toEqual([]);
});

test('a template being typed is completed with its closing braces', () => {
  expect(openTemplate('Facts: {{ fa', 12)).toEqual({ start: 10, prefix: 'fa' });
  expect(openTemplate('no template', 5)).toBeNull();
  expect(applyCompletion('Facts: {{ fa', 12, 'facts.output')).toEqual({ text: 'Facts: {{ facts.output }}', caret: 25 });
  expect(applyCompletion('A {{ x }} B', 6, 'in.text').text).toBe('A {{ in.text }} B');
});

test('a branch offers true/false, or its cases and default; an output offers none', () => {
  expect(sourceHandles({ id: 'b', kind: 'branch', config: { condition: 'x' } })).toEqual(['true', 'false']);
  expect(sourceHandles({ id: 'b', kind: 'branch', config: { cases: [{ handle: 'a', when: 'x' }] } })).toEqual(['a', 'default']);
  expect(sourceHandles({ id: 'o', kind: 'output', config: {} })).toEqual([]);
  expect(sourceHandles({ id: 'a', kind: 'agent', config: {} })).toEqual([null]);
});

test('the form shows an optional field as its type and keeps defaults out of the config', () => {
  const schema = formSchema({
    type: 'object', required: ['prompt'],
    properties: {
      prompt: { type: 'string' },
      system: { anyOf: [{ type: 'string' }, { type: 'null' }], default: null, title: 'System' },
      max_steps: { type: 'integer', default: 8, maximum: 50 },
    },
  });
  expect(schema.properties.system).toEqual({ type: 'string', title: 'System' });
  expect(schema.properties.max_steps).toEqual({ type: 'integer', maximum: 50, description: 'default: 8' });
  expect(cleanConfig({ prompt: 'p', system: undefined, nested: { a: undefined, b: 1 } })).toEqual({ prompt: 'p', nested: { b: 1 } });
  expect(dslOf(emptyDoc())).toEqual({ version: '1', nodes: [], edges: [] });
});
