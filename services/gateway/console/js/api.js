// The console's only way to the server: the public /api/v1 HTTP API with a bearer token.
// Errors arrive as RFC 9457 problem+json; ApiError keeps `detail` and the validation `errors`.

export const API = '/api/v1';
const TOKEN_KEY = 'agentix.token';
const USER_KEY = 'agentix.user';

export class ApiError extends Error {
  constructor(status, problem) {
    const detail = (problem && (problem.detail || problem.title)) || `HTTP ${status}`;
    super(detail);
    this.status = status;
    this.problem = problem || {};
    this.errors = Array.isArray(problem && problem.errors) ? problem.errors : [];
    this.requestId = problem && problem.request_id;
  }
}

export const session = {
  get token() { return sessionStorage.getItem(TOKEN_KEY); },
  get user() {
    try { return JSON.parse(sessionStorage.getItem(USER_KEY) || 'null'); } catch { return null; }
  },
  save(token, user) {
    sessionStorage.setItem(TOKEN_KEY, token);
    sessionStorage.setItem(USER_KEY, JSON.stringify(user));
  },
  clear() {
    sessionStorage.removeItem(TOKEN_KEY);
    sessionStorage.removeItem(USER_KEY);
  },
};

// Called when the server says the token is no longer good (401): the app returns to login.
let onUnauthorized = () => {};
export function setUnauthorizedHandler(fn) { onUnauthorized = fn; }

export function authHeaders() {
  const token = session.token;
  return token ? { Authorization: `Bearer ${token}` } : {};
}

async function problemOf(resp) {
  const text = await resp.text();
  try {
    const body = JSON.parse(text);
    if (body && typeof body === 'object') return body;
  } catch { /* not JSON: fall through */ }
  return { title: resp.statusText || `HTTP ${resp.status}`, detail: text.slice(0, 300) || `HTTP ${resp.status}` };
}

export async function checked(resp) {
  if (resp.ok) return resp;
  const problem = await problemOf(resp);
  if (resp.status === 401 && session.token) onUnauthorized(problem);
  throw new ApiError(resp.status, problem);
}

/**
 * `api('/tasks', {method: 'POST', body: {...}})` → parsed JSON (or null for 204).
 * `query` adds URL parameters (empty values are left out); `form` sends multipart FormData.
 */
export async function api(path, { method = 'GET', body, form, query, headers = {}, signal } = {}) {
  const url = new URL(API + path, location.origin);
  for (const [k, v] of Object.entries(query || {})) {
    if (v !== undefined && v !== null && v !== '') url.searchParams.set(k, String(v));
  }
  const init = { method, headers: { Accept: 'application/json', ...authHeaders(), ...headers }, signal };
  if (form) init.body = form;
  else if (body !== undefined) {
    init.body = JSON.stringify(body);
    init.headers['Content-Type'] = 'application/json';
  }
  let resp;
  try {
    resp = await fetch(url, init);
  } catch (err) {
    if (err.name === 'AbortError') throw err;
    throw new ApiError(0, { title: 'Network error', detail: `The server could not be reached (${err.message}).` });
  }
  await checked(resp);
  if (resp.status === 204) return null;
  const type = resp.headers.get('content-type') || '';
  return type.includes('json') ? resp.json() : resp.text();
}

/** Decode a JWT's claims (no verification: only to show who is logged in). */
export function claimsOf(token) {
  try {
    const part = token.split('.')[1].replace(/-/g, '+').replace(/_/g, '/');
    return JSON.parse(atob(part + '='.repeat((4 - (part.length % 4)) % 4)));
  } catch {
    return {};
  }
}

export async function login(username, password) {
  const body = await api('/auth/login', { method: 'POST', body: { username, password } });
  const claims = claimsOf(body.access_token);
  session.save(body.access_token, { name: claims.sub || username, admin: claims.role === 'admin' });
  // Admins may also come from the server's allowlist, which the token does not show: ask.
  if (!session.user.admin) {
    try {
      await api('/admin/models/chain');
      session.save(body.access_token, { ...session.user, admin: true });
    } catch { /* 403: a regular user */ }
  }
  return session.user;
}

export function logout() {
  session.clear();
}

/** A short random key so a double-clicked submit never starts two runs. */
export function idempotencyKey() {
  if (crypto.randomUUID) return crypto.randomUUID();
  return Array.from(crypto.getRandomValues(new Uint8Array(16)), (b) => b.toString(16).padStart(2, '0')).join('');
}
