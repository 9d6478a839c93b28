"""Lines typed to `agentix chat` when its input is a pipe, read so that a Ctrl-C is never lost.

`input()` on a pipe blocks in read(2). A SIGINT that lands after the last check for signals
but before that read starts does not interrupt it: Python's handler (the KeyboardInterrupt)
only runs once a line or the end of input comes. Here the wait is a select(2) on the input and
on a wakeup pipe the signal module writes to on every signal, so a signal that arrives at any
moment ends the wait and its KeyboardInterrupt is raised at once. A terminal keeps `input()`
and its line editing."""

from __future__ import annotations

import contextlib
import os
import select
import signal
import sys


class PipeInput:
    """Reads lines from file descriptor `fd`; `close` gives the signal module's wakeup fd back."""

    def __init__(self, fd: int | None = None) -> None:
        self.fd = sys.stdin.fileno() if fd is None else fd
        self._pending = b""
        self._ended = False
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_r, False)
        os.set_blocking(self._wake_w, False)
        self._previous_wakeup = signal.set_wakeup_fd(self._wake_w)  # main thread only, as `input()` is

    def readline(self, prompt: str) -> str:
        """The next line without its newline; EOFError at the end of input."""
        sys.stdout.write(prompt)
        sys.stdout.flush()
        while b"\n" not in self._pending and not self._ended:
            readable, _, _ = select.select([self.fd, self._wake_r], [], [])
            if self._wake_r in readable:
                self._drain_wakeups()  # a signal came: its handler runs before the next wait
                continue
            chunk = os.read(self.fd, 65536)
            self._pending += chunk
            self._ended = not chunk
        if not self._pending:
            raise EOFError
        line, _, self._pending = self._pending.partition(b"\n")
        return line.decode(errors="replace")

    def close(self) -> None:
        signal.set_wakeup_fd(self._previous_wakeup)
        for fd in (self._wake_r, self._wake_w):
            with contextlib.suppress(OSError):
                os.close(fd)

    def _drain_wakeups(self) -> None:
        with contextlib.suppress(BlockingIOError):
            while os.read(self._wake_r, 512):
                pass
