// Formatting of times, durations, numbers and problem items, shared by every page.

import type { ProblemItem } from './api';

export function fmtTime(value: string | null | undefined): string {
  if (!value) return '—';
  const d = new Date(value);
  return Number.isNaN(d.getTime()) ? String(value) : d.toLocaleString();
}

export function fmtAge(seconds: number | null | undefined): string {
  if (seconds === null || seconds === undefined || Number.isNaN(seconds)) return '—';
  if (seconds < 60) return `${seconds.toFixed(1)} s`;
  if (seconds < 3600) return `${Math.floor(seconds / 60)} min ${Math.floor(seconds % 60)} s`;
  return `${(seconds / 3600).toFixed(1)} h`;
}

export function fmtMs(ms: number | null | undefined): string {
  if (ms === null || ms === undefined || Number.isNaN(Number(ms))) return '—';
  const n = Number(ms);
  return n < 1000 ? `${Math.round(n)} ms` : `${(n / 1000).toFixed(2)} s`;
}

export function fmtNum(n: number | null | undefined): string {
  return n === null || n === undefined ? '—' : Number(n).toLocaleString();
}

export function fmtCost(c: number | null | undefined): string {
  return c === null || c === undefined ? '—' : `$${Number(c).toFixed(4)}`;
}

export function fmtJson(value: unknown): string {
  if (typeof value === 'string') return value;
  try { return JSON.stringify(value, null, 2); } catch { return String(value); }
}

export function durationOf(start: string | null | undefined, end?: string | null): number | null {
  if (!start) return null;
  return (end ? new Date(end).getTime() : Date.now()) - new Date(start).getTime();
}

/**
 * One problem item as a sentence: where (node, edge, field, position), then the message. A
 * place the message already names is not said twice ("node b: config.prompt: node 'b':
 * config.prompt: required" reads "node 'b': config.prompt: required").
 */
export function problemItemText(e: ProblemItem): string {
  const message = e.message || '';
  const says = (text: string) => message.includes(text);
  const has = (v: unknown) => v !== undefined && v !== null && v !== '';
  // A DSL error that names its node or edge is about that place: its field is said with it.
  const namesNode = has(e.node_id) && says(`'${e.node_id}'`);
  const namesEdge = has(e.edge_index) && says(`[${e.edge_index}]`);
  const where = [
    has(e.node_id) && !namesNode ? `node ${e.node_id}` : null,
    has(e.edge_index) && !namesEdge ? `edge ${e.edge_index}` : null,
    has(e.field) && !namesNode && !namesEdge && !says(`${e.field}:`) ? e.field : null,
    has(e.position) && !says(`character ${e.position}`) ? `at character ${e.position}` : null,
  ].filter(Boolean);
  return where.length ? `${where.join(', ')}: ${message}` : message;
}
