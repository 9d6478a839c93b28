import { api } from '../api.js';
import { h, clear, badge, empty, errorBox, fmtAge, fmtNum, fmtTime, table, poll } from '../ui.js';

const DEFAULT_INTERVAL_S = 5;

/** Heartbeat age now, from the age the server measured plus the time since we asked. */
export function liveAge(inst, fetchedAt) {
  return (inst.age_s ?? 0) + (performance.now() - fetchedAt) / 1000;
}

export function isStale(inst, fetchedAt) {
  const interval = inst.interval_s ?? inst.detail?.interval_s ?? DEFAULT_INTERVAL_S;
  return inst.healthy === false || inst.lost === true || liveAge(inst, fetchedAt) > 2 * interval;
}

function probeRows(infra) {
  return Object.entries(infra || {}).map(([name, v]) => ({ name, ...(v && typeof v === 'object' ? v : { ok: Boolean(v) }) }));
}

function probeDetail(p) {
  const rest = Object.entries(p).filter(([k]) => !['name', 'ok'].includes(k));
  return rest.length ? rest.map(([k, v]) => `${k}: ${typeof v === 'object' ? JSON.stringify(v) : v}`).join(' · ') : '—';
}

/** Breakers as the status API reports them: {model: {model, state, instances: [...]}} or a list. */
export function breakerRows(breakers) {
  const list = Array.isArray(breakers) ? breakers : Object.values(breakers || {});
  return list.map((b) => {
    const inst = b.instances || [];
    const failures = inst.reduce((s, i) => s + (i.failures || 0), b.failures || 0);
    const recent = [...(b.recent_failures || []), ...inst.flatMap((i) => i.recent_failures || [])];
    const lastError = b.last_error || inst.map((i) => i.last_error).find(Boolean) || null;
    return { model: b.model, state: b.state || 'closed', failures, recent: [...new Set(recent)].slice(-5), lastError, replicas: inst.length };
  });
}

export function breakerTable(breakers) {
  const rows = breakerRows(breakers);
  if (!rows.length) return empty('No breaker reported yet: dispatchers report them in their heartbeats once a model was called.');
  return table([
    { label: 'Model', cell: (r) => h('strong', {}, r.model) },
    { label: 'Breaker', cell: (r) => badge(r.state.replace('_', '-'), r.state) },
    { label: 'Failures', class: 'num', cell: (r) => fmtNum(r.failures) },
    { label: 'Recent failures', class: 'wrap', cell: (r) => (r.recent.length ? h('ul', { class: 'apply-list' }, r.recent.map((f) => h('li', {}, f))) : (r.lastError || '—')) },
    { label: 'Dispatchers', class: 'num', cell: (r) => fmtNum(r.replicas) },
  ], rows, { caption: 'Model breakers', rowAttrs: (r) => ({ 'data-model': r.model }) });
}

function render(parts, data, fetchedAt) {
  const instances = [...(data.instances || []), ...(data.lost || []).map((i) => ({ ...i, lost: true }))];
  clear(parts.instances, instances.length
    ? table([
      { label: 'Service', cell: (r) => h('strong', {}, r.service) },
      { label: 'Instance', cell: (r) => h('code', {}, r.instance) },
      { label: 'Version', cell: (r) => r.version || '—' },
      { label: 'Started', class: 'time', cell: (r) => fmtTime(r.started_at) },
      { label: 'Heartbeat age', class: 'num', cell: (r) => h('span', { class: 'age', 'data-instance': r.instance }, fmtAge(liveAge(r, fetchedAt))) },
      { label: 'Load', class: 'num', cell: (r) => (r.load ? `${r.load.inflight ?? 0} running · ${r.load.done ?? 0} done` : '—') },
      { label: 'State', cell: (r) => h('span', { class: 'state', 'data-instance': r.instance }, isStale(r, fetchedAt) ? badge('stale', 'stale') : badge('healthy', 'healthy')) },
    ], instances, {
      caption: 'Service instances',
      rowAttrs: (r) => ({ class: isStale(r, fetchedAt) ? 'stale' : '', 'data-instance': r.instance }),
    })
    : empty('No service has sent a heartbeat yet.'));
  parts.rows = instances;
  parts.fetchedAt = fetchedAt;

  const probes = probeRows(data.infrastructure || data.infra);
  clear(parts.infra, probes.length
    ? table([
      { label: 'Probe', cell: (r) => h('strong', {}, r.name) },
      { label: 'State', cell: (r) => (r.configured === false ? badge('not configured', 'disabled') : badge(r.ok ? 'ok' : 'failing', r.ok ? 'ok' : 'error')) },
      { label: 'Detail', class: 'wrap', cell: probeDetail },
    ], probes, { caption: 'Infrastructure probes' })
    : empty('No probe results.'));

  const tools = [];
  for (const [service, entry] of Object.entries(data.tools || {})) {
    for (const t of entry.tools || []) tools.push({ service, instances: entry.instances, ...t });
  }
  clear(parts.tools, tools.length
    ? table([
      { label: 'Service', cell: (r) => `${r.service} (${r.instances})` },
      { label: 'Tool', cell: (r) => h('code', {}, r.name) },
      { label: 'Requests', class: 'num', cell: (r) => fmtNum(r.requests) },
      { label: 'Errors', class: 'num', cell: (r) => (r.errors ? badge(fmtNum(r.errors), 'error') : '0') },
      { label: 'Avg latency', class: 'num', cell: (r) => (r.avg_latency_ms === null || r.avg_latency_ms === undefined ? '—' : `${Number(r.avg_latency_ms).toFixed(2)} ms`) },
      { label: 'Last error', class: 'wrap', cell: (r) => r.last_error || '—' },
    ], tools, { caption: 'Tool registry' })
    : empty('No tool service answered.'));

  clear(parts.breakers, breakerTable(data.breakers));
  clear(parts.queues, queueTable(data.queues));
}

/** Work queues (tasks, ingest): backlog, in flight, redelivered, and dead letters waiting. */
export function queueTable(queues) {
  const rows = Object.entries(queues || {}).map(([name, q]) => ({ name, ...q }));
  if (!rows.length) return empty('Queue state is unavailable while NATS is unreachable.');
  return table([
    { label: 'Queue', cell: (r) => h('strong', {}, r.name) },
    { label: 'Waiting', class: 'num', cell: (r) => (r.ok ? fmtNum(r.waiting) : badge(r.error || 'unavailable', 'error')) },
    { label: 'In flight', class: 'num', cell: (r) => (r.ok ? fmtNum(r.in_flight) : '—') },
    { label: 'Redelivered', class: 'num', cell: (r) => (r.ok ? fmtNum(r.redelivered) : '—') },
    { label: 'Dead letters', class: 'num', cell: (r) => (r.dead_letters ? badge(fmtNum(r.dead_letters), 'error') : (r.dead_letters === 0 ? '0' : '—')) },
  ], rows, { caption: 'Work queues', rowAttrs: (r) => ({ 'data-queue': r.name }) });
}

/** Re-draw only the ages and stale marks between polls, so "stale" appears the moment it is. */
function tick(parts) {
  if (!parts.rows) return;
  for (const r of parts.rows) {
    const row = parts.instances.querySelector(`tr[data-instance="${CSS.escape(r.instance)}"]`);
    if (!row) continue;
    row.querySelector('.age').textContent = fmtAge(liveAge(r, parts.fetchedAt));
    const stale = isStale(r, parts.fetchedAt);
    if (row.classList.contains('stale') !== stale) {
      row.classList.toggle('stale', stale);
      clear(row.querySelector('.state'), stale ? badge('stale', 'stale') : badge('healthy', 'healthy'));
    }
  }
}

export default {
  title: 'Status',
  admin: true,
  render(main) {
    const parts = {
      instances: h('div', { 'data-testid': 'instances' }, h('p', { class: 'muted' }, 'Loading…')),
      infra: h('div'), tools: h('div'), breakers: h('div'), queues: h('div', { 'data-testid': 'queues' }),
    };
    const problem = h('div');
    main.append(
      h('div', { class: 'page-head' }, h('h1', {}, 'Status'), h('span', { class: 'muted small' }, 'live: polled every 2 s')),
      problem,
      h('section', { class: 'panel', 'aria-labelledby': 'st-inst' }, h('h2', { id: 'st-inst' }, 'Service instances'), parts.instances),
      h('div', { class: 'grid-2' },
        h('section', { class: 'panel', 'aria-labelledby': 'st-infra' }, h('h2', { id: 'st-infra' }, 'Infrastructure'), parts.infra),
        h('section', { class: 'panel', 'aria-labelledby': 'st-br' }, h('h2', { id: 'st-br' }, 'Model breakers'), parts.breakers)),
      h('section', { class: 'panel', 'aria-labelledby': 'st-queues' }, h('h2', { id: 'st-queues' }, 'Work queues'), parts.queues),
      h('section', { class: 'panel', 'aria-labelledby': 'st-tools' }, h('h2', { id: 'st-tools' }, 'Tool registry'), parts.tools));
    const stopPoll = poll(async () => {
      const started = performance.now();
      const data = await api('/admin/status');
      render(parts, data, started);
      clear(problem);
    }, 2000, (err) => clear(problem, errorBox(err)));
    const ticker = setInterval(() => tick(parts), 500);
    return () => { stopPoll(); clearInterval(ticker); };
  },
};
