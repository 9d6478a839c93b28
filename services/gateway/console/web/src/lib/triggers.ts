// The Schedules and Hooks pages' pure logic: the bodies they post, how a schedule's timing and a
// fire read, and a 422 problem split into the messages shown next to each field of a form.

import { ApiError, type ProblemItem } from './api';
import { problemItemText } from './format';

export type TimingMode = 'cron' | 'every' | 'at';
export const TIMING_MODES: [TimingMode, string][] = [['cron', 'cron'], ['every', 'every'], ['at', 'once, at']];
export const CATCH_UP: [string, string][] = [['skip', 'skip — a late fire is recorded skipped'], ['once', 'once — a late fire runs once']];
export const SIGNATURES: [string, string][] = [['standard', 'Standard Webhooks'], ['github', 'GitHub (X-Hub-Signature-256)']];

export interface ScheduleForm {
  name: string;
  workflow_id: string;
  mode: TimingMode;
  timing: string;
  timezone: string;
  catch_up: string;
  max_concurrent: string;
  end_at: string;
  enabled: boolean;
}

export const EMPTY_SCHEDULE: ScheduleForm = {
  name: '', workflow_id: '', mode: 'every', timing: '', timezone: 'UTC', catch_up: 'skip', max_concurrent: '1', end_at: '', enabled: true,
};

/**
 * A `datetime-local` value (the browser's own time) as an instant with its offset, which the
 * server requires; anything else is sent as typed, so the server names the field it refuses.
 */
export function instantOf(local: string): string {
  const t = local.trim();
  if (!/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d+)?)?$/.test(t)) return t;
  const d = new Date(t);
  return Number.isNaN(d.getTime()) ? t : d.toISOString();
}

/** The POST body of a schedule: one timing field, `timezone` only with `cron` (the server refuses it otherwise). */
export function scheduleBody(form: ScheduleForm, input: Record<string, unknown>): Record<string, unknown> {
  const body: Record<string, unknown> = { workflow_id: form.workflow_id, input, enabled: form.enabled, catch_up: form.catch_up };
  if (form.name.trim()) body.name = form.name.trim();
  const timing = form.timing.trim();
  body[form.mode] = form.mode === 'at' ? instantOf(timing) : timing;
  if (form.mode === 'cron' && form.timezone.trim()) body.timezone = form.timezone.trim();
  const max = form.max_concurrent.trim();
  body.max_concurrent = /^\d+$/.test(max) ? Number(max) : max; // a non-number is the server's to name
  if (form.end_at.trim()) body.end_at = instantOf(form.end_at);
  return body;
}

/** The POST body of a hook; `input_mapping` is JSON text ({field: path}), empty for "the body is the input". */
export function hookBody(form: { name: string; workflow_id: string; signature: string; webhook: string; mapping: string }): Record<string, unknown> {
  const body: Record<string, unknown> = { name: form.name.trim(), workflow_id: form.workflow_id, signature: form.signature };
  if (form.webhook.trim()) body.webhook = form.webhook.trim();
  if (form.mapping.trim()) body.input_mapping = parseJsonField(form.mapping, 'input_mapping');
  return body;
}

/** A JSON object typed into a form, or a FieldError naming the field. */
export function parseJsonField(text: string, field: string): Record<string, unknown> {
  let value: unknown;
  try { value = JSON.parse(text.trim() || '{}'); } catch (err: any) { throw new FieldError(field, `not valid JSON: ${err.message}`); }
  if (!value || typeof value !== 'object' || Array.isArray(value)) throw new FieldError(field, 'must be a JSON object');
  return value as Record<string, unknown>;
}

/** A mistake found in the browser, said next to its field like a server's 422. */
export class FieldError extends Error {
  field: string;
  constructor(field: string, message: string) { super(message); this.field = field; }
}

/** How a schedule fires, in words: `cron 0 0 9 * * 1-5 (Europe/Berlin)`, `every 5m`, `once at …`. */
export function timingText(s: { cron?: string | null; every?: string | null; at?: string | null; timezone?: string | null }): string {
  if (s.cron) return `cron ${s.cron}${s.timezone && s.timezone !== 'UTC' ? ` (${s.timezone})` : ' (UTC)'}`;
  if (s.every) return `every ${s.every}`;
  if (s.at) return `once at ${s.at}`;
  return '—';
}

/**
 * A problem's items placed on the form: `fields[name]` is what to say next to that field (the
 * first segment of the item's `field`: `input/text` is the input's, `input_mapping.x` the
 * mapping's; `aliases` maps a server field onto the control showing it), `rest` what no field of
 * the form shows (said in the box under the form with the problem's detail).
 */
export function placeProblem(err: unknown, known: string[], aliases: Record<string, string> = {}): { fields: Record<string, string>; rest: ProblemItem[] } {
  const fields: Record<string, string> = {};
  const rest: ProblemItem[] = [];
  if (err instanceof FieldError) {
    fields[aliases[err.field] || err.field] = err.message;
    return { fields, rest };
  }
  const items = err instanceof ApiError ? err.errors : [];
  for (const item of items) {
    const head = String(item.field || '').split(/[./[]/)[0];
    const name = aliases[head] || head;
    if (head && known.includes(name)) {
      const text = item.message || problemItemText(item);
      fields[name] = fields[name] ? `${fields[name]}; ${text}` : text;
    } else rest.push(item);
  }
  return { fields, rest };
}

/** A fire as one line: started (late or not), or skipped and why. */
export function fireText(f: { outcome: string; reason?: string | null; task_id?: string | null; late?: boolean }): string {
  if (f.outcome === 'started') return `started${f.late ? ' (late)' : ''}${f.task_id ? ` task ${f.task_id}` : ''}`;
  return `skipped: ${f.reason || 'no reason recorded'}`;
}

export const DELIVERY_KIND: Record<string, string> = { delivered: 'ok', failed: 'failed', pending: 'running', waiting: 'waiting' };

/** A delivery can be sent again once its task has ended and it is not being sent now. */
export const canRedeliver = (d: { status: string }) => d.status === 'delivered' || d.status === 'failed';
