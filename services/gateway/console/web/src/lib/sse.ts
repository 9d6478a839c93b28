// Server-sent events over fetch(), because EventSource cannot send the Authorization header.
// The stream resumes where it stopped: every reconnect sends the last seen id (Last-Event-ID and
// ?after=), and the server replays exactly what came after it, tokens included.

import { API, authHeaders, checked, ApiError } from './api';

const WATCHDOG_MS = 30000; // the server sends a `heartbeat` event every 10 s
const MAX_BACKOFF_MS = 10000;

/** Incremental parser of the text/event-stream format (WHATWG HTML §9.2). */
export interface SseMessage { id: string | null; event: string; data: string }

export class SseParser {
  onMessage: (m: SseMessage) => void;
  buf: string;
  data: string[];
  event: string;
  id: string | null;
  retry: number | null;

  constructor(onMessage: (m: SseMessage) => void) {
    this.onMessage = onMessage;
    this.buf = '';
    this.data = [];
    this.event = '';
    this.id = null;
    this.retry = null;
  }

  push(text: string) {
    this.buf += text;
    const re = /\r\n|\n|\r/g;
    let start = 0;
    let m: RegExpExecArray | null;
    while ((m = re.exec(this.buf))) {
      // A lone \r at the end may be the first half of a \r\n split across chunks.
      if (m[0] === '\r' && m.index === this.buf.length - 1) break;
      this.line(this.buf.slice(start, m.index));
      start = re.lastIndex;
    }
    this.buf = this.buf.slice(start);
  }

  line(line: string) {
    if (line === '') return this.dispatch();
    if (line[0] === ':') return undefined; // comment (the server's heartbeat)
    const colon = line.indexOf(':');
    const field = colon < 0 ? line : line.slice(0, colon);
    let value = colon < 0 ? '' : line.slice(colon + 1);
    if (value[0] === ' ') value = value.slice(1);
    if (field === 'data') this.data.push(value);
    else if (field === 'event') this.event = value;
    else if (field === 'id' && !value.includes('\0')) this.id = value;
    else if (field === 'retry' && /^\d+$/.test(value)) this.retry = Number(value);
    return undefined;
  }

  dispatch() {
    if (this.data.length) this.onMessage({ id: this.id, event: this.event || 'message', data: this.data.join('\n') });
    this.data = [];
    this.event = '';
  }
}

/**
 * Follow an SSE endpoint of the API. Calls `onEvent({id, event, data})` with `data` parsed from
 * JSON, in order, once each; reconnects with backoff until a `done` event ends the stream or
 * `close()` is called. `onState(state, detail)` reports 'connecting' | 'open' | 'reconnecting' |
 * 'ended' | 'error'. `after` resumes after a stored event id (page reload).
 */
export interface StreamEvent { id: string | null; event: string; data: any }
export interface Stream { readonly lastId: string | null; close(): void; interrupt(): void }

export function followStream(
  path: string,
  { after = null, onEvent, onState = () => {} }: {
    after?: string | null;
    onEvent: (e: StreamEvent) => void;
    onState?: (state: string, detail: any) => void;
  },
): Stream {
  let lastId = after;
  let closed = false;
  let finished = false;
  let controller: AbortController | null = null;
  let attempt = 0;

  async function connectOnce(): Promise<number | null> {
    controller = new AbortController();
    const url = new URL(API + path, location.origin);
    const headers: Record<string, string> = { Accept: 'text/event-stream', ...authHeaders() };
    if (lastId !== null && lastId !== undefined) {
      url.searchParams.set('after', lastId);
      headers['Last-Event-ID'] = String(lastId);
    }
    const resp = await checked(await fetch(url, { headers, signal: controller.signal, cache: 'no-store' }));
    onState('open', { lastId });
    attempt = 0;
    const reader = resp.body!.pipeThrough(new TextDecoderStream()).getReader();
    let watchdog: ReturnType<typeof setTimeout> | undefined;
    const arm = () => {
      clearTimeout(watchdog);
      watchdog = setTimeout(() => controller!.abort(new Error('stream silent')), WATCHDOG_MS);
    };
    const parser = new SseParser((msg) => {
      let data: any;
      try { data = JSON.parse(msg.data); } catch { data = { raw: msg.data }; }
      if (msg.event === 'heartbeat') return; // the connection lives: not an event of the task
      if (msg.id !== null) lastId = msg.id;
      if (msg.event === 'done') finished = true;
      onEvent({ id: msg.id, event: msg.event, data });
    });
    try {
      arm();
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        arm();
        parser.push(value);
      }
    } finally {
      clearTimeout(watchdog);
    }
    return parser.retry;
  }

  (async () => {
    while (!closed && !finished) {
      if (!attempt) onState('connecting', { lastId });
      let retryMs: number | null = null;
      try {
        retryMs = await connectOnce();
      } catch (err) {
        if (closed) break;
        // 4xx other than 408/429 will not get better by retrying: stop and say why.
        if (err instanceof ApiError && err.status >= 400 && err.status < 500 && ![408, 429].includes(err.status)) {
          onState('error', { error: err });
          return;
        }
      }
      if (closed || finished) break;
      attempt += 1;
      const wait = Math.min(MAX_BACKOFF_MS, retryMs || 500 * 2 ** Math.min(attempt - 1, 5));
      onState('reconnecting', { lastId, attempt, waitMs: wait });
      await new Promise((r) => setTimeout(r, wait));
    }
    if (finished) onState('ended', { lastId });
  })();

  return {
    get lastId() { return lastId; },
    close() {
      closed = true;
      if (controller) controller.abort();
    },
    /** Drop the current connection as if the network failed (it then resumes by itself). */
    interrupt() {
      if (controller) controller.abort(new Error('interrupted'));
    },
  };
}
