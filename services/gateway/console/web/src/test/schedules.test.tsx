// The Schedules page: the list says how each schedule fires and when next; a schedule's history
// shows each fire with its task's run page or why it was skipped; the form posts one timing field
// (and the input from the workflow's input form), and a 422 naming a field is said next to it.

import { afterEach, beforeEach, expect, test, vi } from 'vitest';
import assert from 'node:assert/strict';
import { cleanup, fireEvent, render, waitFor, within } from '@testing-library/react';
import { MemoryRouter, Route, Routes } from 'react-router-dom';
import { ApiError } from '../lib/api';
import SchedulesPage from '../pages/Schedules';
import { EMPTY_SCHEDULE, placeProblem, scheduleBody } from '../lib/triggers';
import { fakeApi } from './fakeapi';

beforeEach(() => sessionStorage.setItem('agentix.token', 't'));
afterEach(() => { cleanup(); vi.unstubAllGlobals(); sessionStorage.clear(); });

const WF = { id: 'wf_1', name: 'digest', dsl: { version: '1', nodes: [{ id: 'in', kind: 'input', config: { schema: { type: 'object', required: ['topic'], properties: { topic: { type: 'string', title: 'Topic' } } } } }], edges: [] } };
const SCHEDULE = {
  id: 'sch_1', name: 'morning digest', workflow_id: 'wf_1', input: { topic: 'x' }, cron: '0 0 9 * * 1-5', every: null, at: null, timezone: 'Europe/Berlin',
  enabled: true, catch_up: 'skip', max_concurrent: 1, end_at: null, last_fired_at: '2026-12-07T08:00:00+00:00',
  next_fire_times: ['2026-12-08T09:00:00+01:00', '2026-12-09T09:00:00+01:00'],
};
const FIRES = [
  { id: 'now:sch_1:abc', seq: null, fired_at: '2026-12-07T10:00:00+00:00', outcome: 'started', reason: null, task_id: 't_run', late: false },
  { id: 'fire:sch_1:7', seq: 7, fired_at: '2026-12-07T08:00:00+00:00', outcome: 'skipped', reason: '1 run(s) of this schedule still running (max_concurrent: 1)', task_id: null, late: false },
];

function page(at = '/schedules') {
  return render(<MemoryRouter initialEntries={[at]}><Routes>
    <Route path="/schedules" element={<SchedulesPage />} /><Route path="/schedules/:id" element={<SchedulesPage />} />
  </Routes></MemoryRouter>);
}

test('the list shows the timing, the state, the next fire times; the history links each started task and says why a fire was skipped', async () => {
  fakeApi({
    'GET /workflows': () => ({ body: { items: [WF] } }),
    'GET /schedules': () => ({ body: { items: [SCHEDULE, { ...SCHEDULE, id: 'sch_2', name: 'paused one', cron: null, every: '5m', enabled: false, next_fire_times: [], last_fired_at: null }] } }),
    'GET /schedules/sch_1/fires': () => ({ body: { items: FIRES } }),
  });
  const { container, findByTestId } = page('/schedules/sch_1');
  const history = await findByTestId('fire-history');
  const row = container.querySelector('tr[data-schedule="morning digest"]')!;
  expect(row.textContent).toContain('cron 0 0 9 * * 1-5 (Europe/Berlin)');
  expect(row.textContent).toContain('digest'); // the workflow's name
  expect(row.querySelectorAll('[data-testid="next-fires"] li')).toHaveLength(2);
  expect(within(row as HTMLElement).getByRole('button', { name: 'Pause morning digest' })).toBeTruthy();
  const paused = container.querySelector('tr[data-schedule="paused one"]')!;
  expect(paused.getAttribute('data-enabled')).toBe('false');
  expect(paused.textContent).toContain('every 5m');
  expect(within(paused as HTMLElement).getByRole('button', { name: 'Resume paused one' })).toBeTruthy();
  await waitFor(() => expect(history.querySelectorAll('tr[data-fire]')).toHaveLength(2));
  const started = history.querySelector('tr[data-outcome="started"] a')!;
  expect(started.getAttribute('href')).toBe('/runs/t_run');
  expect(history.querySelector('tr[data-outcome="skipped"]')!.textContent).toContain('still running (max_concurrent: 1)');
});

test('run now posts to the schedule and pause posts pause', async () => {
  const calls = fakeApi({
    'GET /workflows': () => ({ body: { items: [WF] } }),
    'GET /schedules': () => ({ body: { items: [SCHEDULE] } }),
    'GET /schedules/sch_1/fires': () => ({ body: { items: FIRES } }),
    'POST /schedules/sch_1/run': () => ({ status: 202, body: { fire_id: 'now:sch_1:x', task_id: 't_new' } }),
    'POST /schedules/sch_1/pause': () => ({ body: { ...SCHEDULE, enabled: false, next_fire_times: [] } }),
  });
  const { findByRole, findByTestId } = page();
  fireEvent.click(await findByRole('button', { name: 'Run morning digest now' }));
  await findByTestId('fire-history'); // run now shows the schedule's history
  fireEvent.click(await findByRole('button', { name: 'Pause morning digest' }));
  await waitFor(() => expect(calls.map((c) => `${c.method} ${c.path}`)).toContain('POST /schedules/sch_1/pause'));
  expect(calls.map((c) => `${c.method} ${c.path}`)).toContain('POST /schedules/sch_1/run');
});

test('the form sends the input from the workflow\'s input form and one timing; a 422 naming cron is said next to the cron field', async () => {
  let refuse = true;
  const calls = fakeApi({
    'GET /workflows': () => ({ body: { items: [WF] } }),
    'GET /workflows/wf_1': () => ({ body: WF }),
    'GET /schedules': () => ({ body: { items: [] } }),
    'POST /schedules': () => (refuse
      ? { status: 422, body: { title: 'Invalid request', status: 422, detail: 'cron: expected 6 fields', errors: [{ code: 'invalid', field: 'cron', message: 'expected 6 fields (seconds first), got 5' }] } }
      : { status: 201, body: { ...SCHEDULE, id: 'sch_9', name: 'made' } }),
  });
  const { container, findByLabelText, getByLabelText, getByText } = page();
  const form = container.querySelector('[data-testid="schedule-form"]') as HTMLElement;
  await waitFor(() => expect(form.querySelectorAll('select[name="workflow_id"] option')).toHaveLength(2));
  fireEvent.change(form.querySelector('select[name="workflow_id"]')!, { target: { value: 'wf_1' } });
  fireEvent.change(await findByLabelText(/Topic/), { target: { value: 'rust' } }); // the input node's schema as a form
  fireEvent.change(getByLabelText('Fires'), { target: { value: 'cron' } });
  fireEvent.change(getByLabelText('Cron expression'), { target: { value: '0 9 * * *' } });
  fireEvent.change(getByLabelText('Time zone'), { target: { value: 'Europe/Berlin' } });
  fireEvent.click(getByText('Make schedule'));
  const cron = getByLabelText('Cron expression');
  await waitFor(() => expect(cron.getAttribute('aria-invalid')).toBe('true'));
  expect(cron.closest('.field')!.querySelector('[data-field-error]')!.textContent).toBe('expected 6 fields (seconds first), got 5');
  expect(getByLabelText('Time zone').getAttribute('aria-invalid')).toBeNull();
  const sent = calls.find((c) => c.method === 'POST')!.body;
  expect(sent).toEqual({ workflow_id: 'wf_1', input: { topic: 'rust' }, enabled: true, catch_up: 'skip', cron: '0 9 * * *', timezone: 'Europe/Berlin', max_concurrent: 1 });
  refuse = false;
  fireEvent.change(cron, { target: { value: '0 0 9 * * *' } });
  fireEvent.click(getByText('Make schedule'));
  await waitFor(() => expect(calls.filter((c) => c.method === 'POST')).toHaveLength(2));
  await waitFor(() => expect(form.querySelector('[data-field-error]')).toBeNull()); // made: the form starts again, nothing marked
  expect((form.querySelector('input[name="timing"]') as HTMLInputElement).value).toBe('');
});

test('input typed as JSON that does not parse is said next to the input, nothing is sent', async () => {
  const calls = fakeApi({
    'GET /workflows': () => ({ body: { items: [{ id: 'wf_2', name: 'free' }] } }),
    'GET /workflows/wf_2': () => ({ body: { id: 'wf_2', dsl: { version: '1', nodes: [], edges: [] } } }),
    'GET /schedules': () => ({ body: { items: [] } }),
  });
  const { container, getByLabelText, getByText } = page();
  const form = container.querySelector('[data-testid="schedule-form"]') as HTMLElement;
  await waitFor(() => expect(form.querySelectorAll('select[name="workflow_id"] option')).toHaveLength(2));
  fireEvent.change(form.querySelector('select[name="workflow_id"]')!, { target: { value: 'wf_2' } });
  fireEvent.change(getByLabelText('Input (JSON)'), { target: { value: '{"a": ' } });
  fireEvent.click(getByText('Make schedule'));
  await waitFor(() => expect(getByLabelText('Input (JSON)').getAttribute('aria-invalid')).toBe('true'));
  expect(calls.filter((c) => c.method === 'POST')).toHaveLength(0);
});

test('a body carries only the chosen timing, `timezone` only with cron, `at` and `end_at` as instants', () => {
  const every = scheduleBody({ ...EMPTY_SCHEDULE, workflow_id: 'wf', mode: 'every', timing: ' 5m ', timezone: 'Europe/Paris' }, {});
  assert.deepEqual(every, { workflow_id: 'wf', input: {}, enabled: true, catch_up: 'skip', every: '5m', max_concurrent: 1 });
  const at = scheduleBody({ ...EMPTY_SCHEDULE, workflow_id: 'wf', mode: 'at', timing: '2030-01-02T03:04', end_at: 'soon', max_concurrent: 'x' }, { a: 1 });
  assert.equal(at.at, new Date('2030-01-02T03:04').toISOString());
  assert.equal(at.end_at, 'soon'); // not a local time: sent as typed, for the server to name
  assert.equal(at.max_concurrent, 'x');
  assert.equal('timezone' in at, false);
});

test('a problem\'s items are placed on the fields they name; the others are left for the box', () => {
  const err = new ApiError(422, { detail: 'bad', errors: [
    { field: 'every', message: 'too short' }, { field: 'input/topic', message: 'required' }, { field: 'assistant', message: 'extra' }, { message: 'no field' }] });
  const { fields, rest } = placeProblem(err, ['timing', 'input'], { every: 'timing' });
  assert.deepEqual(fields, { timing: 'too short', input: 'required' });
  assert.deepEqual(rest.map((r) => r.message), ['extra', 'no field']);
});
