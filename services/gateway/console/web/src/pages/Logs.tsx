// The audit log and the guardrail events: a paginated, filterable table over a newest-first
// admin list (`{items, next_cursor}`). Filters go to the server as query parameters and are
// also applied to the rows of the page, so the table is right whether or not the server filters.

import { useEffect, useState, type ReactNode } from 'react';
import { Link } from 'react-router-dom';
import { api } from '../lib/api';
import { fmtTime } from '../lib/format';
import { Badge, Empty, ErrorBox, Field, Loading, PageHead, Select, Table, usePager, useTitle, type Column } from '../components/ui';

interface Filter { name: string; label: string; options?: ([string, string] | string)[]; placeholder?: string; match: (row: any, value: string) => boolean }

export const contains = (field: string) => (row: any, v: string) => String(row[field] ?? '').toLowerCase().includes(v.toLowerCase());
export const equals = (field: string) => (row: any, v: string) => String(row[field] ?? '') === v;

function LogTable({ title, path, columns, filters, emptyText }: { title: string; path: string; columns: Column<any>[]; filters: Filter[]; emptyText: string }) {
  useTitle(title);
  const [values, setValues] = useState<Record<string, string>>({});
  const [size, setSize] = useState('50');
  const [problem, setProblem] = useState<unknown>(null);
  const active = Object.fromEntries(Object.entries(values).map(([k, v]) => [k, v.trim()]).filter(([, v]) => v));
  const pages = usePager<any>((cursor) => api(path, { query: { limit: size, cursor, ...active } }), setProblem);
  useEffect(() => { pages.reset(); }, [size]); // eslint-disable-line react-hooks/exhaustive-deps
  const rows = pages.items;
  const shown = (rows || []).filter((r) => filters.every((f) => !active[f.name] || f.match(r, active[f.name])));
  let body: ReactNode = <Loading />;
  if (rows) {
    body = (
      <>
        {shown.length ? <Table caption={title} columns={columns} rows={shown} />
          : <Empty message={rows.length ? 'No row on this page matches the filters. Try older pages or clear a filter.' : emptyText} />}
        {Object.keys(active).length && rows.length ? <p className="muted small">{`${shown.length} of ${rows.length} rows on this page match.`}</p> : null}
      </>
    );
  }
  return (
    <>
      <PageHead title={title}><span className="muted small">newest first</span><button type="button" onClick={() => pages.reload()}>Refresh</button></PageHead>
      <form className="toolbar" role="search" aria-label={`Filter ${title}`} onSubmit={(ev) => { ev.preventDefault(); setProblem(null); pages.reset(); }}>
        {filters.map((f) => (
          <Field key={f.name} label={f.label}>
            {f.options
              ? <Select name={f.name} value={values[f.name] || ''} onChange={(e) => setValues({ ...values, [f.name]: e.target.value })} options={[['', 'any'], ...f.options]} />
              : <input name={f.name} type="search" placeholder={f.placeholder || ''} value={values[f.name] || ''} onChange={(e) => setValues({ ...values, [f.name]: e.target.value })} />}
          </Field>
        ))}
        <Field label="Page size"><Select name="limit" value={size} onChange={(e) => setSize(e.target.value)} options={['25', '50', '100', '200']} /></Field>
        <div className="field"><label aria-hidden="true">{'\u00a0'}</label><button type="submit" className="primary">Apply</button></div>
        <div className="field"><label aria-hidden="true">{'\u00a0'}</label><button type="button" onClick={() => { setValues({}); setTimeout(() => pages.reset()); }}>Clear</button></div>
      </form>
      <ErrorBox error={problem} />
      <div aria-live="polite">{body}</div>
      {pages.controls}
    </>
  );
}

export function AuditPage() {
  return (
    <LogTable title="Audit log" path="/admin/audit" emptyText="No change has been recorded yet."
      filters={[
        { name: 'user_id', label: 'User', match: contains('user_id') },
        { name: 'method', label: 'Method', options: ['POST', 'PUT', 'DELETE'], match: equals('method') },
        { name: 'outcome', label: 'Outcome', options: ['ok', 'rejected', 'denied', 'error'], match: equals('outcome') },
        { name: 'route', label: 'Route or target', placeholder: 'e.g. /admin/models', match: (r, v) => contains('route')(r, v) || contains('target')(r, v) },
      ]}
      columns={[
        { label: 'When', className: 'time', cell: (r) => fmtTime(r.ts) },
        { label: 'User', cell: (r) => r.user_id || '—' },
        { label: 'Method', cell: (r) => <code>{r.method}</code> },
        { label: 'Route', className: 'wrap', cell: (r) => <code>{r.route}</code> },
        { label: 'Target', className: 'wrap', cell: (r) => r.target || '—' },
        { label: 'Status', className: 'num', cell: (r) => r.status },
        { label: 'Outcome', cell: (r) => <Badge text={r.outcome} kind={r.outcome === 'ok' ? 'ok' : r.outcome} /> },
        { label: 'Request', cell: (r) => <code className="small">{r.request_id || '—'}</code> },
      ]} />
  );
}

export function GuardrailPage() {
  return (
    <LogTable title="Guardrail events" path="/admin/guardrail-events" emptyText="No guardrail has fired yet."
      filters={[
        { name: 'action', label: 'Action', options: ['block', 'flag', 'redact', 'allow'], match: equals('action') },
        { name: 'tier', label: 'Tier', options: [['1', 'tier 1 (gateway)'], ['2', 'tier 2 (dispatcher)']], match: equals('tier') },
        { name: 'user_id', label: 'User', match: contains('user_id') },
        { name: 'q', label: 'Rule or reason', match: (r, v) => contains('rule')(r, v) || contains('reason')(r, v) },
      ]}
      columns={[
        { label: 'When', className: 'time', cell: (r) => fmtTime(r.ts) },
        { label: 'Tier', className: 'num', cell: (r) => r.tier },
        { label: 'Action', cell: (r) => <Badge text={r.action} /> },
        { label: 'Rule', cell: (r) => <code>{r.rule || '—'}</code> },
        { label: 'Reason', className: 'wrap', cell: (r) => r.reason || '—' },
        { label: 'User', cell: (r) => r.user_id || '—' },
        { label: 'Where', className: 'wrap', cell: (r) => (r.task_id ? <Link to={`/runs/${encodeURIComponent(r.task_id)}`}>{r.task_id}</Link> : <code>{r.route || '—'}</code>) },
      ]} />
  );
}
