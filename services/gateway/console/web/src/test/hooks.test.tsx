// The Hooks page: a new hook's URL and secret are shown once, in a dialog; the list never shows
// the secret and enables or disables a hook; a 422 naming a field is said next to it; the
// completion callbacks' log shows status, attempts and last error, and redelivers an ended one.

import { afterEach, beforeEach, expect, test, vi } from 'vitest';
import { cleanup, fireEvent, render, waitFor, within } from '@testing-library/react';
import { MemoryRouter } from 'react-router-dom';
import HooksPage from '../pages/Hooks';
import { dialogs, fakeApi } from './fakeapi';

beforeEach(() => { sessionStorage.setItem('agentix.token', 't'); dialogs(); });
afterEach(() => { cleanup(); vi.unstubAllGlobals(); sessionStorage.clear(); });

const WF = { id: 'wf_1', name: 'triage' };
const HOOK = { id: 'hk_1', name: 'ci', workflow_id: 'wf_1', url: '/hooks/hk_1', input_mapping: {}, signature: 'standard', webhook: null, enabled: true, calls: 3, last_called_at: null };
const SECRET = 'whsec_c2VjcmV0LW9mLXRoZS10ZXN0';
const DELIVERIES = [
  { id: 'cb_1', task_id: 't_1', run: 0, url: 'https://rx.example.com/done', status: 'failed', attempts: 7, last_status_code: 500, last_error: 'server error', created_at: '2026-12-07T10:00:00Z' },
  { id: 'cb_2', task_id: 't_2', run: 0, url: 'https://rx.example.com/done', status: 'waiting', attempts: 0, last_status_code: null, last_error: null, created_at: '2026-12-07T10:01:00Z' },
];

function routes(extra: Record<string, any> = {}) {
  let hooks = [HOOK];
  return {
    'GET /workflows': () => ({ body: { items: [WF] } }),
    'GET /hooks': () => ({ body: { items: hooks } }),
    'POST /hooks': ({ body }: any) => {
      const made = { ...HOOK, id: 'hk_2', name: body.name, url: '/hooks/hk_2', calls: 0 };
      hooks = [made, ...hooks];
      return { status: 201, body: { ...made, secret: SECRET } };
    },
    'PATCH /hooks/hk_1': ({ body }: any) => { hooks = hooks.map((h) => (h.id === 'hk_1' ? { ...h, ...body } : h)); return { body: hooks[hooks.length - 1] }; },
    'GET /callbacks': () => ({ body: { items: DELIVERIES } }),
    'POST /callbacks/cb_1/redeliver': () => ({ status: 202, body: { id: 'cb_1', status: 'pending' } }),
    ...extra,
  };
}

const page = () => render(<MemoryRouter><HooksPage /></MemoryRouter>);

test('a new hook shows its URL and secret once; the list shows neither the secret again', async () => {
  const calls = fakeApi(routes());
  const { container, getByLabelText, getByText, findByTestId } = page();
  await waitFor(() => expect(container.querySelectorAll('select[name="workflow_id"] option')).toHaveLength(2));
  fireEvent.change(getByLabelText('Name'), { target: { value: 'orders' } });
  fireEvent.change(container.querySelector('select[name="workflow_id"]')!, { target: { value: 'wf_1' } });
  fireEvent.click(getByText('Make hook'));
  expect((await findByTestId('hook-secret')).textContent).toBe(SECRET);
  expect((await findByTestId('hook-url')).textContent).toBe(`${window.location.origin}/hooks/hk_2`);
  expect(calls.find((c) => c.method === 'POST')!.body).toEqual({ name: 'orders', workflow_id: 'wf_1', signature: 'standard' });
  fireEvent.click(within(container.querySelector('dialog')!).getByText('Done'));
  await waitFor(() => expect(container.querySelector('dialog')).toBeNull());
  await waitFor(() => expect(container.querySelector('tr[data-hook="orders"]')).toBeTruthy());
  expect(container.textContent).not.toContain(SECRET);
});

test('disable patches enabled: false', async () => {
  const calls = fakeApi(routes());
  const { findByRole } = page();
  fireEvent.click(await findByRole('button', { name: 'Disable ci' }));
  await findByRole('button', { name: 'Enable ci' });
  expect(calls.find((c) => c.method === 'PATCH')!.body).toEqual({ enabled: false });
});

test('a refused callback URL is said next to its field; a mapping that is not JSON is caught before sending', async () => {
  const calls = fakeApi(routes({
    'POST /hooks': () => ({ status: 422, body: { title: 'Invalid request', status: 422, detail: 'webhook refused', errors: [{ code: 'invalid', field: 'webhook', message: 'the address 127.0.0.1 is not public' }] } }),
  }));
  const { getByLabelText, getByText } = page();
  fireEvent.change(getByLabelText('Name'), { target: { value: 'x' } });
  fireEvent.change(getByLabelText('Input mapping (JSON)'), { target: { value: '{"a": ' } });
  fireEvent.click(getByText('Make hook'));
  await waitFor(() => expect(getByLabelText('Input mapping (JSON)').getAttribute('aria-invalid')).toBe('true'));
  expect(calls.filter((c) => c.method === 'POST')).toHaveLength(0);
  fireEvent.change(getByLabelText('Input mapping (JSON)'), { target: { value: '' } });
  fireEvent.change(getByLabelText('Completion callback'), { target: { value: 'http://127.0.0.1/x' } });
  fireEvent.click(getByText('Make hook'));
  const field = getByLabelText('Completion callback');
  await waitFor(() => expect(field.getAttribute('aria-invalid')).toBe('true'));
  expect(field.closest('.field')!.textContent).toContain('the address 127.0.0.1 is not public');
});

test('the callbacks log shows status, attempts and last error; only an ended delivery is redelivered', async () => {
  const calls = fakeApi(routes());
  const { container, findByRole } = page();
  const redeliver = await findByRole('button', { name: 'Redeliver cb_1' });
  const failed = container.querySelector('tr[data-delivery="cb_1"]')!;
  expect(failed.textContent).toContain('failed');
  expect(failed.textContent).toContain('7');
  expect(failed.textContent).toContain('HTTP 500: server error');
  expect(container.querySelector('tr[data-delivery="cb_2"] button')).toBeNull(); // waiting: the task has not ended
  fireEvent.click(redeliver);
  await waitFor(() => expect(calls.map((c) => `${c.method} ${c.path}`)).toContain('POST /callbacks/cb_1/redeliver'));
});
