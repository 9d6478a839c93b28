// The form that makes a schedule: a saved workflow, its input (the input node's JSON-Schema form,
// or JSON), the timing (cron | every | at), time zone, catch-up, concurrency and end. A 422 is
// said next to the field it names.

import { useMemo, useRef, useState } from 'react';
import { api } from '../lib/api';
import { inputSchema } from '../lib/dsl';
import { CATCH_UP, EMPTY_SCHEDULE, FieldError, TIMING_MODES, parseJsonField, placeProblem, scheduleBody, type ScheduleForm as Form, type TimingMode } from '../lib/triggers';
import { ErrorBox, Field, Select } from './ui';
import { InputForm, type InputFormHandle } from './InputForm';
import type { WorkflowList } from './WorkflowSelect';

const FIELDS = ['workflow_id', 'input', 'name', 'timing', 'timezone', 'catch_up', 'max_concurrent', 'end_at', 'enabled'];
// The three timing fields are one control: the one the mode picked.
const ALIASES = { cron: 'timing', every: 'timing', at: 'timing' };
const TIMING_HINT: Record<TimingMode, string> = {
  cron: '6 fields, seconds first: 0 0 9 * * 1-5, or @daily, @hourly',
  every: 'an interval of at least 1s: 30s, 5m, 1h30m',
  at: 'one fire, at this time of your browser (sent with its offset)',
};
const ZONES: string[] = (() => { try { return (Intl as any).supportedValuesOf('timeZone'); } catch { return ['UTC']; } })();

export function ScheduleForm({ workflows, onMade }: { workflows: WorkflowList | null; onMade: (schedule: any) => void }) {
  const [form, setForm] = useState<Form>(EMPTY_SCHEDULE);
  const [schema, setSchema] = useState<Record<string, any> | null>(null);
  const [raw, setRaw] = useState(false);
  const [rawInput, setRawInput] = useState('{}');
  const [problem, setProblem] = useState<unknown>(null);
  const [busy, setBusy] = useState(false);
  const inputForm = useRef<InputFormHandle>(null);
  const set = (patch: Partial<Form>) => setForm((f) => ({ ...f, ...patch }));
  const placed = useMemo(() => placeProblem(problem, FIELDS, ALIASES), [problem]);
  const err = (name: string) => placed.fields[name] || null;
  const useForm = !!schema && !raw;

  const pick = async (id: string) => {
    set({ workflow_id: id });
    setSchema(null);
    if (!id) return;
    try { setSchema(inputSchema((await api(`/workflows/${encodeURIComponent(id)}`)).dsl)); } catch (e) { setProblem(e); }
  };

  const readInput = (): Record<string, unknown> => {
    if (!useForm) return parseJsonField(rawInput, 'input');
    try { return inputForm.current!.read(); } catch (e: any) { throw new FieldError('input', e.message); }
  };

  return (
    <form className="panel" aria-labelledby="schedule-new" data-testid="schedule-form" noValidate onSubmit={async (ev) => {
      ev.preventDefault();
      setBusy(true);
      setProblem(null);
      try {
        const made = await api('/schedules', { method: 'POST', body: scheduleBody(form, readInput()) });
        setForm({ ...EMPTY_SCHEDULE, workflow_id: form.workflow_id });
        onMade(made);
      } catch (e) { setProblem(e); } finally { setBusy(false); }
    }}>
      <h2 id="schedule-new">New schedule</h2>
      <div className="form-grid">
        <Field label="Workflow" error={err('workflow_id')}><Select name="workflow_id" value={form.workflow_id} options={workflows?.options || [['', 'Loading saved workflows…']]} onChange={(e) => pick(e.target.value)} /></Field>
        <Field label="Name" hint="optional; the workflow's name otherwise" error={err('name')}><input name="name" maxLength={200} autoComplete="off" value={form.name} onChange={(e) => set({ name: e.target.value })} /></Field>
      </div>
      <fieldset><legend>Input</legend>
        {schema ? (
          <div className="field inline"><input type="checkbox" id="schedule-raw-input" checked={raw} onChange={(e) => {
            if (e.target.checked) { try { setRawInput(JSON.stringify(inputForm.current?.read() ?? {}, null, 2)); } catch { /* keep what is there */ } }
            setRaw(e.target.checked);
          }} /><label htmlFor="schedule-raw-input">Edit the input as JSON</label></div>
        ) : null}
        <div hidden={!useForm}>{schema ? <InputForm key={form.workflow_id} ref={inputForm} schema={schema} /> : null}</div>
        {useForm ? (err('input') ? <div className="field-error" data-field-error="">{err('input')}</div> : null) : (
          <Field label="Input (JSON)" hint={form.workflow_id ? 'the workflow declares no input schema: any JSON object' : undefined} error={err('input')}>
            <textarea name="input" rows={3} spellCheck={false} value={rawInput} onChange={(e) => setRawInput(e.target.value)} />
          </Field>
        )}
      </fieldset>
      <fieldset><legend>Timing</legend>
        <div className="form-grid">
          <Field label="Fires"><Select name="mode" options={TIMING_MODES} value={form.mode} onChange={(e) => set({ mode: e.target.value as TimingMode, timing: '' })} /></Field>
          <Field label={form.mode === 'cron' ? 'Cron expression' : form.mode === 'every' ? 'Interval' : 'At'} hint={TIMING_HINT[form.mode]} error={err('timing')}>
            <input name="timing" type={form.mode === 'at' ? 'datetime-local' : 'text'} step={form.mode === 'at' ? 1 : undefined} autoComplete="off" value={form.timing}
              placeholder={form.mode === 'cron' ? '0 0 9 * * 1-5' : form.mode === 'every' ? '5m' : undefined} onChange={(e) => set({ timing: e.target.value })} />
          </Field>
          <Field label="Time zone" hint={form.mode === 'cron' ? 'IANA, how the cron is read' : 'only with cron'} error={err('timezone')}>
            <input name="timezone" list="schedule-zones" autoComplete="off" disabled={form.mode !== 'cron'} value={form.timezone} onChange={(e) => set({ timezone: e.target.value })} />
          </Field>
          <Field label="End" hint="optional: no fire after it" error={err('end_at')}><input name="end_at" type="datetime-local" step={1} value={form.end_at} onChange={(e) => set({ end_at: e.target.value })} /></Field>
        </div>
        <datalist id="schedule-zones">{ZONES.map((z) => <option key={z} value={z} />)}</datalist>
      </fieldset>
      <fieldset><legend>Runs</legend>
        <div className="form-grid">
          <Field label="Catch up" hint="after the whole cluster was stopped" error={err('catch_up')}><Select name="catch_up" options={CATCH_UP} value={form.catch_up} onChange={(e) => set({ catch_up: e.target.value })} /></Field>
          <Field label="Max concurrent" hint="a fire while this many run is skipped" error={err('max_concurrent')}><input name="max_concurrent" type="number" min={1} max={1000} value={form.max_concurrent} onChange={(e) => set({ max_concurrent: e.target.value })} /></Field>
        </div>
        <div className="field inline"><input type="checkbox" id="schedule-enabled" checked={form.enabled} onChange={(e) => set({ enabled: e.target.checked })} /><label htmlFor="schedule-enabled">Enabled (unticked: made paused)</label></div>
      </fieldset>
      <ErrorBox error={problem instanceof FieldError ? null : problem} items={placed.rest} />
      <div className="actions"><button type="submit" className="primary" data-action="make-schedule" disabled={busy}>Make schedule</button></div>
    </form>
  );
}
