// The console's only way to the server: the public /api/v1 HTTP API with a bearer token.
// Errors arrive as RFC 9457 problem+json; ApiError keeps `detail` and the validation `errors`.

export const API = '/api/v1';
const TOKEN_KEY = 'agentix.token';
const USER_KEY = 'agentix.user';

export interface ProblemItem {
  code?: string;
  message?: string;
  node_id?: string | null;
  edge_index?: number | null;
  field?: string | null;
  position?: number | null;
}

export interface User { name: string; admin: boolean }

export class ApiError extends Error {
  status: number;
  problem: Record<string, any>;
  errors: ProblemItem[];
  requestId?: string;

  constructor(status: number, problem: Record<string, any> | null) {
    const detail = (problem && (problem.detail || problem.title)) || `HTTP ${status}`;
    super(detail);
    this.status = status;
    this.problem = problem || {};
    this.errors = Array.isArray(problem && problem.errors) ? problem!.errors : [];
    this.requestId = problem ? problem.request_id : undefined;
  }
}

export const session = {
  get token(): string | null { return sessionStorage.getItem(TOKEN_KEY); },
  get user(): User | null {
    try { return JSON.parse(sessionStorage.getItem(USER_KEY) || 'null'); } catch { return null; }
  },
  save(token: string, user: User) {
    sessionStorage.setItem(TOKEN_KEY, token);
    sessionStorage.setItem(USER_KEY, JSON.stringify(user));
  },
  clear() {
    sessionStorage.removeItem(TOKEN_KEY);
    sessionStorage.removeItem(USER_KEY);
  },
};

// Called when the server says the token is no longer good (401): the app returns to login.
let onUnauthorized: (problem: unknown) => void = () => {};
export function setUnauthorizedHandler(fn: (problem: unknown) => void) { onUnauthorized = fn; }

export function authHeaders(): Record<string, string> {
  const token = session.token;
  return token ? { Authorization: `Bearer ${token}` } : {};
}

async function problemOf(resp: Response): Promise<Record<string, any>> {
  const text = await resp.text();
  try {
    const body = JSON.parse(text);
    if (body && typeof body === 'object') return body;
  } catch { /* not JSON: fall through */ }
  return { title: resp.statusText || `HTTP ${resp.status}`, detail: text.slice(0, 300) || `HTTP ${resp.status}` };
}

export async function checked(resp: Response): Promise<Response> {
  if (resp.ok) return resp;
  const problem = await problemOf(resp);
  if (resp.status === 401 && session.token) onUnauthorized(problem);
  throw new ApiError(resp.status, problem);
}

export interface ApiOptions {
  method?: string;
  body?: unknown;
  form?: FormData;
  query?: Record<string, unknown>;
  headers?: Record<string, string>;
  signal?: AbortSignal;
}

/**
 * `api('/tasks', {method: 'POST', body: {...}})` → parsed JSON (or null for 204).
 * `query` adds URL parameters (empty values are left out); `form` sends multipart FormData.
 */
export async function api<T = any>(path: string, { method = 'GET', body, form, query, headers = {}, signal }: ApiOptions = {}): Promise<T> {
  const url = new URL(API + path, location.origin);
  for (const [k, v] of Object.entries(query || {})) {
    if (v !== undefined && v !== null && v !== '') url.searchParams.set(k, String(v));
  }
  const init: RequestInit & { headers: Record<string, string> } = { method, headers: { Accept: 'application/json', ...authHeaders(), ...headers }, signal };
  if (form) init.body = form;
  else if (body !== undefined) {
    init.body = JSON.stringify(body);
    init.headers['Content-Type'] = 'application/json';
  }
  let resp: Response;
  try {
    resp = await fetch(url, init);
  } catch (err: any) {
    if (err.name === 'AbortError') throw err;
    throw new ApiError(0, { title: 'Network error', detail: `The server could not be reached (${err.message}).` });
  }
  await checked(resp);
  if (resp.status === 204) return null as T;
  const type = resp.headers.get('content-type') || '';
  return (type.includes('json') ? resp.json() : resp.text()) as Promise<T>;
}

/** Decode a JWT's claims (no verification: only to show who is logged in). */
export function claimsOf(token: string): Record<string, any> {
  try {
    const part = token.split('.')[1].replace(/-/g, '+').replace(/_/g, '/');
    return JSON.parse(atob(part + '='.repeat((4 - (part.length % 4)) % 4)));
  } catch {
    return {};
  }
}

export async function login(username: string, password: string): Promise<User | null> {
  const body = await api('/auth/login', { method: 'POST', body: { username, password } });
  const claims = claimsOf(body.access_token);
  session.save(body.access_token, { name: claims.sub || username, admin: claims.role === 'admin' });
  // Admins may also come from the server's allowlist, which the token does not show: ask.
  if (!session.user!.admin) {
    try {
      await api('/admin/models/chain');
      session.save(body.access_token, { ...session.user!, admin: true });
    } catch { /* 403: a regular user */ }
  }
  return session.user;
}

export function logout() {
  session.clear();
}

/** A short random key so a double-clicked submit never starts two runs. */
export function idempotencyKey(): string {
  if (crypto.randomUUID) return crypto.randomUUID();
  return Array.from(crypto.getRandomValues(new Uint8Array(16)), (b) => b.toString(16).padStart(2, '0')).join('');
}

export const enc = encodeURIComponent;

/** One JSON-RPC request to the gateway's MCP endpoint (`POST /mcp`, stateless, JSON answers). */
export async function mcpRequest(method: string, params: Record<string, unknown> = {}): Promise<any> {
  const resp = await checked(await fetch('/mcp', {
    method: 'POST',
    headers: { ...authHeaders(), 'Content-Type': 'application/json', Accept: 'application/json, text/event-stream', 'MCP-Protocol-Version': '2025-06-18' },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method, params }),
  }));
  return resp.json();
}
