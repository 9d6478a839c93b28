// A run followed live: the task's event stream folded into a RunState (at most once per event
// id), kept in sessionStorage with its last id so a reload resumes with ?after=<id> and the
// text continues without a gap or a duplicate. Re-renders at most once per animation frame.

import { useCallback, useEffect, useReducer, useRef, useState } from 'react';
import { followStream, type Stream } from './sse';
import { applyEvent, initialState, loadState, saveState, type RunState } from './runstate';

const SAVE_EVERY_MS = 250;

export function useRunStream(taskId: string | null, { onEnded }: { onEnded?: () => void } = {}) {
  const state = useRef<RunState | null>(null);
  const [, redraw] = useReducer((n: number) => n + 1, 0);
  const [conn, setConn] = useState<{ state: string; detail?: any }>({ state: 'idle' });
  const stream = useRef<Stream | null>(null);
  const frame = useRef<number | null>(null);
  const saveTimer = useRef<ReturnType<typeof setTimeout> | null>(null);
  const endedRef = useRef(onEnded);
  endedRef.current = onEnded;

  if (taskId && (!state.current || state.current.taskId !== taskId)) state.current = loadState(taskId) || initialState(taskId);

  const persistNow = useCallback(() => {
    if (saveTimer.current) clearTimeout(saveTimer.current);
    saveTimer.current = null;
    if (state.current) saveState(state.current);
  }, []);

  const follow = useCallback(() => {
    if (!taskId || !state.current) return;
    stream.current?.close();
    const s = state.current;
    stream.current = followStream(`/tasks/${encodeURIComponent(taskId)}/events`, {
      after: s.lastId,
      onEvent(msg) {
        if (!applyEvent(s, msg)) return;
        if (!saveTimer.current) saveTimer.current = setTimeout(() => { saveTimer.current = null; saveState(s); }, SAVE_EVERY_MS);
        if (frame.current === null) frame.current = requestAnimationFrame(() => { frame.current = null; redraw(); });
      },
      onState(st, detail) {
        setConn({ state: st, detail });
        if (st === 'ended') { persistNow(); endedRef.current?.(); }
      },
    });
  }, [taskId, persistNow]);

  useEffect(() => {
    window.addEventListener('pagehide', persistNow);
    return () => {
      stream.current?.close();
      stream.current = null;
      persistNow();
      window.removeEventListener('pagehide', persistNow);
      if (frame.current !== null) cancelAnimationFrame(frame.current);
      frame.current = null;
    };
  }, [taskId, persistNow]);

  return { state: state.current, conn, follow, redraw };
}
