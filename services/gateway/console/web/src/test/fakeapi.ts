// A stand-in for the gateway's `/api/v1` in component tests: each route answers the shape
// docs/API.md gives (the browser tests in tests/e2e/console/ drive the real gateway). Every call
// is recorded, so a test can say what the page sent.

import { vi } from 'vitest';

export interface Call { method: string; path: string; body: any }
type Handler = (call: Call) => { status?: number; body?: unknown } | undefined;

export function fakeApi(routes: Record<string, Handler>) {
  const calls: Call[] = [];
  vi.stubGlobal('fetch', async (url: URL | string, init: RequestInit = {}) => {
    const u = new URL(String(url));
    const call = { method: init.method || 'GET', path: u.pathname.replace(/^\/api\/v1/, '') + u.search, body: init.body ? JSON.parse(String(init.body)) : undefined };
    calls.push(call);
    const key = `${call.method} ${u.pathname.replace(/^\/api\/v1/, '')}`;
    const out = routes[key]?.(call);
    if (!out) return new Response(JSON.stringify({ title: 'Not Found', status: 404, detail: `no fake route ${key}` }), { status: 404, headers: { 'content-type': 'application/problem+json' } });
    const status = out.status ?? 200;
    if (status === 204) return new Response(null, { status });
    return new Response(JSON.stringify(out.body ?? {}), { status, headers: { 'content-type': status >= 400 ? 'application/problem+json' : 'application/json' } });
  });
  return calls;
}

/** jsdom has no modal dialogs: showModal/close toggle `open` and close fires `close`, as in a browser. */
export function dialogs() {
  const proto = HTMLDialogElement.prototype as any;
  if (!proto.showModal || !String(proto.showModal).includes('setAttribute')) {
    proto.showModal = function showModal(this: HTMLDialogElement) { this.setAttribute('open', ''); };
    proto.close = function close(this: HTMLDialogElement) { this.removeAttribute('open'); this.dispatchEvent(new Event('close')); };
  }
}
