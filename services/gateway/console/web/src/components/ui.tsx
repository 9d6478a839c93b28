// The console's building blocks: badges, empty states, problem boxes, labelled fields, tables,
// dialogs, toasts, busy buttons, polling and cursor paging. Text only: nothing a server or a
// model returns is ever put in as markup (React escapes it; the chat's Markdown is sanitised).

import {
  cloneElement, isValidElement, useCallback, useEffect, useId, useRef, useState, useSyncExternalStore,
  type ButtonHTMLAttributes, type ReactElement, type ReactNode,
} from 'react';
import { api, ApiError, type ProblemItem } from '../lib/api';
import { problemItemText } from '../lib/format';

export function Badge({ text, kind }: { text: ReactNode; kind?: string | null }) {
  kind = kind ?? (typeof text === "string" ? text : "");
  return <span className={`badge badge-${String(kind ?? '').replace(/[^a-z0-9_-]/gi, '')}`}>{text}</span>;
}

export function Empty({ message, children }: { message: ReactNode; children?: ReactNode }) {
  return <div className="empty" role="status"><p>{message}</p>{children}</div>;
}

export function Loading() {
  return <p className="muted">Loading…</p>;
}

/**
 * A problem+json error as a readable box: its `detail` and each validation item (`items`, when
 * given, are the ones left to say here: a form shows the others next to their fields).
 */
export function ErrorBox({ error, items: only }: { error: unknown; items?: ProblemItem[] }) {
  if (!error) return null;
  const err = error as any;
  const isApi = err instanceof ApiError;
  const detail = isApi ? err.message : String(err && err.message ? err.message : err);
  const items = only ?? (isApi ? err.errors : []);
  return (
    <div className="error" role="alert">
      <strong>{isApi && err.status ? `${err.status} ${err.problem.title || 'Error'}: ` : 'Error: '}</strong>
      {detail}
      {items.length ? (
        <ul>{items.map((e, i) => <li key={i}>{e.code ? <code>{e.code}</code> : null} {problemItemText(e)}</li>)}</ul>
      ) : null}
      {isApi && err.requestId ? <div className="muted small">request {err.requestId}</div> : null}
    </div>
  );
}

/** A labelled form field: the label points at the control (its id is made here). */
export function Field({ label, hint, error, children, className }: { label: ReactNode; hint?: ReactNode; error?: string | null; children: ReactElement; className?: string }) {
  const made = useId();
  const child = children as ReactElement<{ id?: string; 'aria-invalid'?: boolean; 'aria-describedby'?: string }>;
  const id = (isValidElement(child) && child.props.id) || made;
  // A server's word on this field (a 422 naming it) sits under the control and is read with it.
  const extra = error ? { 'aria-invalid': true, 'aria-describedby': `${id}-error` } : {};
  return (
    <div className={`field ${className || ''}`}>
      <label htmlFor={id}>{label}</label>
      {cloneElement(child, { id, ...extra })}
      {hint ? <div className="hint">{hint}</div> : null}
      {error ? <div className="field-error" id={`${id}-error`} data-field-error="">{error}</div> : null}
    </div>
  );
}

export function Select({ options, ...rest }: { options: ([string, string] | string)[] } & React.SelectHTMLAttributes<HTMLSelectElement>) {
  return (
    <select {...rest}>
      {options.map((o) => {
        const [v, label] = Array.isArray(o) ? o : [o, o];
        return <option key={v} value={v}>{label}</option>;
      })}
    </select>
  );
}

export interface Column<T> { label: string; cell: (row: T) => ReactNode; className?: string }

/** A table that scrolls sideways on a narrow window instead of squeezing; cells are labelled for the card view. */
export function Table<T>({ columns, rows, caption, rowProps, rowKey }: {
  columns: (Column<T> | null | false)[]; rows: T[]; caption?: string;
  rowProps?: (row: T) => Record<string, any>; rowKey?: (row: T, index: number) => string;
}) {
  const cols = columns.filter(Boolean) as Column<T>[];
  return (
    <div className="table-wrap">
      <table>
        {caption ? <caption className="sr-only">{caption}</caption> : null}
        <thead><tr>{cols.map((c) => <th key={c.label} scope="col" className={c.className}>{c.label}</th>)}</tr></thead>
        <tbody>
          {rows.map((row, i) => (
            <tr key={rowKey ? rowKey(row, i) : i} {...(rowProps ? rowProps(row) : {})}>
              {cols.map((c) => <td key={c.label} className={c.className} data-label={c.label}>{c.cell(row)}</td>)}
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}

/** A modal <dialog>: Esc closes it, focus stays inside (native behaviour). */
export function Dialog({ title, onClose, children }: { title: string; onClose: () => void; children: ReactNode }) {
  const ref = useRef<HTMLDialogElement>(null);
  const closeRef = useRef(onClose);
  closeRef.current = onClose;
  useEffect(() => {
    const dlg = ref.current!;
    if (!dlg.open) dlg.showModal();
    const closed = () => closeRef.current();
    dlg.addEventListener('close', closed);
    return () => dlg.removeEventListener('close', closed);
  }, []);
  return (
    <dialog ref={ref} className="dialog" aria-label={title}>
      <header><h2>{title}</h2><button type="button" className="icon" aria-label="Close" onClick={() => ref.current?.close()}>×</button></header>
      {children}
    </dialog>
  );
}

// ---------------------------------------------------------------- toasts

interface Toast { id: number; message: string; kind: string }
let toasts: Toast[] = [];
let toastSeq = 0;
const toastListeners = new Set<() => void>();
function emitToasts() { for (const l of toastListeners) l(); }

export function toast(message: string, kind = 'info') {
  const t = { id: (toastSeq += 1), message, kind };
  toasts = [...toasts, t].slice(-3);
  emitToasts();
  setTimeout(() => { toasts = toasts.filter((x) => x !== t); emitToasts(); }, kind === 'error' ? 8000 : 4000);
}

export function Toasts() {
  const list = useSyncExternalStore((cb) => { toastListeners.add(cb); return () => { toastListeners.delete(cb); }; }, () => toasts);
  return (
    <div className="toasts" aria-live="polite">
      {list.map((t) => <div key={t.id} className={`toast toast-${t.kind}`} role={t.kind === 'error' ? 'alert' : 'status'}>{t.message}</div>)}
    </div>
  );
}

// ---------------------------------------------------------------- actions

/** A button running an async action: disabled meanwhile, errors shown as a toast. */
export function BusyButton({ action, disabled, children, ...rest }: { action: () => Promise<unknown> | unknown } & Omit<ButtonHTMLAttributes<HTMLButtonElement>, 'onClick'>) {
  const [busy, setBusy] = useState(false);
  const mounted = useRef(true);
  useEffect(() => () => { mounted.current = false; }, []);
  return (
    <button
      type="button"
      {...rest}
      disabled={disabled || busy}
      aria-busy={busy ? 'true' : undefined}
      onClick={async () => {
        setBusy(true);
        try { await action(); } catch (err: any) { toast(err?.message || String(err), 'error'); } finally { if (mounted.current) setBusy(false); }
      }}
    >{children}</button>
  );
}

/** A row's irreversible action (delete, revoke): asks first (`ask`), sends DELETE to `path`, says
 * `done` and runs `after` (a reload). Its accessible name is `${label} ${what}`. */
export function DeleteButton({ what, ask, path, done, after, label = 'Delete' }: {
  what: string; ask: string; path: string; done: string; after: () => Promise<unknown> | unknown; label?: string;
}) {
  return (
    <BusyButton className="small danger" aria-label={`${label} ${what}`} action={async () => {
      if (!window.confirm(ask)) return;
      await api(path, { method: 'DELETE' });
      toast(done, 'ok');
      await after();
    }}>{label}</BusyButton>
  );
}

/** Run `fn` now and every `ms` after the previous call finished; errors go to `onError` and polling goes on. */
export function usePoll(fn: () => Promise<void>, ms: number, onError: (err: unknown) => void = () => {}) {
  const fnRef = useRef(fn);
  const errRef = useRef(onError);
  fnRef.current = fn;
  errRef.current = onError;
  useEffect(() => {
    let stopped = false;
    let timer: ReturnType<typeof setTimeout> | undefined;
    const tick = async () => {
      try { await fnRef.current(); } catch (err) { if (!stopped) errRef.current(err); }
      if (!stopped) timer = setTimeout(tick, ms);
    };
    tick();
    return () => { stopped = true; clearTimeout(timer); };
  }, [ms]);
}

/**
 * Cursor paging: keeps the cursors of the pages seen so "Newer" works too. `load(cursor)` must
 * return `{items, next_cursor}`. Returns the page's items, the controls, and reset/reload.
 */
export function usePager<T>(load: (cursor: string | null) => Promise<{ items?: T[]; next_cursor?: string | null }>, onError: (err: unknown) => void) {
  const [state, setState] = useState<{ items: T[] | null; index: number; next: string | null; stack: (string | null)[] }>({ items: null, index: 0, next: null, stack: [null] });
  const loadRef = useRef(load);
  loadRef.current = load;
  const stateRef = useRef(state);
  stateRef.current = state;
  const go = useCallback(async (i: number, fresh = false) => {
    const s = fresh ? { items: null, index: 0, next: null, stack: [null] } : stateRef.current;
    const cursor = i > s.index ? s.next : s.stack[i] ?? null;
    let page;
    try { page = await loadRef.current(cursor); } catch (err) { onError(err); return; }
    const stack = [...s.stack];
    stack[i] = cursor;
    setState({ items: page.items || [], index: i, next: page.next_cursor || null, stack });
  }, [onError]);
  const controls = state.index === 0 && !state.next ? null : (
    <nav className="pager" aria-label="Pages">
      <button type="button" disabled={state.index === 0} onClick={() => go(state.index - 1)}>← Newer</button>
      <span className="muted">page {state.index + 1}</span>
      <button type="button" disabled={!state.next} onClick={() => go(state.index + 1)}>Older →</button>
    </nav>
  );
  return { items: state.items, controls, reset: () => go(0, true), reload: () => go(stateRef.current.index) };
}

/** Page title "X · Agentix". */
export function useTitle(title: string) {
  useEffect(() => { document.title = `${title} · Agentix`; }, [title]);
}

export function PageHead({ title, children }: { title: ReactNode; children?: ReactNode }) {
  return <div className="page-head"><h1>{title}</h1>{children}</div>;
}
