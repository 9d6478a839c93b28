// Schedules: the caller's schedules (`/api/v1/schedules`) — how each fires, whether it is
// enabled, its next fire times and last fire — made with the form below, paused and resumed, run
// now and deleted; `/console/schedules/<id>` shows a schedule's fire history (started, with its
// task's run page, or skipped and why).

import { useCallback, useState } from 'react';
import { Link, useNavigate, useParams } from 'react-router-dom';
import { api, enc, session } from '../lib/api';
import { fmtTime } from '../lib/format';
import { fireText, timingText } from '../lib/triggers';
import { Badge, BusyButton, DeleteButton, Empty, ErrorBox, Loading, PageHead, Table, toast, usePoll, useTitle } from '../components/ui';
import { ScheduleForm } from '../components/ScheduleForm';
import { useWorkflows } from '../components/WorkflowSelect';

// The list follows the schedules as they fire (last fired, next fire times) at this pace.
const POLL_MS = 5000;

function NextFires({ times }: { times: string[] | undefined }) {
  if (!times || !times.length) return <span className="muted">none</span>;
  return <ol className="next-fires" data-testid="next-fires">{times.map((t) => <li key={t} title={t}>{fmtTime(t)}</li>)}</ol>;
}

function FireHistory({ schedule, onClose }: { schedule: any; onClose: () => void }) {
  const [fires, setFires] = useState<any[] | null>(null);
  const [problem, setProblem] = useState<unknown>(null);
  usePoll(async () => { setFires((await api(`/schedules/${enc(schedule.id)}/fires`, { query: { limit: 50 } })).items || []); setProblem(null); }, 3000, setProblem);
  return (
    <section className="panel" aria-labelledby="fires-head" data-testid="fire-history" data-schedule-id={schedule.id}>
      <div className="page-head"><h2 id="fires-head">Fires of {schedule.name}</h2><button type="button" className="small" onClick={onClose}>Close</button></div>
      <ErrorBox error={problem} />
      {fires === null ? <Loading /> : !fires.length ? <Empty message="No fire yet." /> : (
        <Table caption={`Fires of ${schedule.name}`} rows={fires} rowKey={(f) => f.id} rowProps={(f) => ({ 'data-fire': f.id, 'data-outcome': f.outcome })} columns={[
          { label: 'Fired', className: 'time', cell: (f) => fmtTime(f.fired_at) },
          { label: 'Outcome', cell: (f) => <>{<Badge text={f.outcome} kind={f.outcome === 'started' ? 'ok' : 'skipped'} />}{f.late ? <> <Badge text="late" kind="warn" /></> : null}</> },
          { label: 'Task', cell: (f) => (f.task_id ? <Link to={`/runs/${enc(f.task_id)}`} data-task={f.task_id}><code>{f.task_id}</code></Link> : '—') },
          { label: 'Why', cell: (f) => (f.outcome === 'skipped' ? fireText(f) : f.id.startsWith('now:') ? 'run now' : 'on schedule') },
        ]} />
      )}
    </section>
  );
}

export default function SchedulesPage() {
  useTitle('Schedules');
  const { id: selected } = useParams();
  const navigate = useNavigate();
  const workflows = useWorkflows();
  const [schedules, setSchedules] = useState<any[] | null>(null);
  const [problem, setProblem] = useState<unknown>(null);
  const load = useCallback(async () => { setSchedules((await api('/schedules')).items || []); setProblem(null); }, []);
  usePoll(load, POLL_MS, setProblem);
  const current = schedules?.find((s) => s.id === selected) || null;
  const act = async (s: any, what: 'pause' | 'resume') => {
    await api(`/schedules/${enc(s.id)}/${what}`, { method: 'POST' });
    toast(`${s.name} ${what === 'pause' ? 'paused' : 'resumed'}.`, 'ok');
    await load();
  };
  return (
    <>
      <PageHead title="Schedules" />
      <p className="muted">A schedule starts a saved workflow by itself, at a cron, an interval or once at a time; each fire is a task of yours, or a skip that says why.</p>
      <ErrorBox error={problem} />
      <section className="panel"><h2>Your schedules</h2>
        <div data-testid="schedule-list">
          {schedules === null ? <Loading /> : !schedules.length ? <Empty message="No schedule yet. Make one below from a saved workflow." /> : (
            <Table caption="Schedules" rows={schedules} rowKey={(s) => s.id} rowProps={(s) => ({ 'data-schedule': s.name, 'data-enabled': String(s.enabled), 'aria-current': s.id === selected ? 'true' : undefined })} columns={[
              { label: 'Name', cell: (s) => <Link to={`/schedules/${enc(s.id)}`}><strong>{s.name}</strong></Link> },
              { label: 'Workflow', cell: (s) => workflows?.names[s.workflow_id] || <code>{s.workflow_id}</code> },
              !!session.user?.admin && { label: 'Owner', cell: (s) => s.user_id }, // an admin sees everyone's
              { label: 'Timing', cell: (s) => <><code>{timingText(s)}</code>{s.end_at ? <div className="muted small">until {fmtTime(s.end_at)}</div> : null}</> },
              { label: 'State', cell: (s) => <Badge text={s.enabled ? 'enabled' : 'paused'} kind={s.enabled ? 'enabled' : 'disabled'} /> },
              { label: 'Next fires', className: 'time', cell: (s) => <NextFires times={s.next_fire_times} /> },
              { label: 'Last fired', className: 'time', cell: (s) => (s.last_fired_at ? fmtTime(s.last_fired_at) : 'never') },
              { label: 'Actions', cell: (s) => (
                <div className="actions">
                  {s.enabled
                    ? <BusyButton className="small" aria-label={`Pause ${s.name}`} action={() => act(s, 'pause')}>Pause</BusyButton>
                    : <BusyButton className="small" aria-label={`Resume ${s.name}`} action={() => act(s, 'resume')}>Resume</BusyButton>}
                  <BusyButton className="small" aria-label={`Run ${s.name} now`} action={async () => {
                    const out = await api(`/schedules/${enc(s.id)}/run`, { method: 'POST' });
                    toast(`${s.name} started task ${out.task_id}.`, 'ok');
                    navigate(`/schedules/${enc(s.id)}`);
                    await load(); // its last fire
                  }}>Run now</BusyButton>
                  <Link className="button small" to={`/schedules/${enc(s.id)}`} aria-label={`Fires of ${s.name}`}>History</Link>
                  <DeleteButton what={s.name} path={`/schedules/${enc(s.id)}`} done={`${s.name} deleted.`}
                    ask={`Delete the schedule ${s.name}? It fires no more.`} after={async () => {
                      if (s.id === selected) navigate('/schedules');
                      await load();
                    }} />
                </div>
              ) },
            ]} />
          )}
        </div>
      </section>
      {current ? <FireHistory key={current.id} schedule={current} onClose={() => navigate('/schedules')} /> : selected && schedules ? <ErrorBox error={new Error(`No schedule ${selected} (deleted, or not yours).`)} /> : null}
      <ScheduleForm workflows={workflows} onMade={(s) => { toast(`Schedule ${s.name} made.`, 'ok'); load(); }} />
    </>
  );
}
