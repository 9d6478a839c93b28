"""`agentix chat` reading a pipe: lines however the bytes arrive, EOFError at the end, and a
Ctrl-C (SIGINT) that ends the wait for a line at once — also one sent while nothing is typed."""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Iterator

import pytest

from agentix.chat_input import PipeInput


@pytest.fixture
def pipe() -> Iterator[tuple[PipeInput, int]]:
    read_fd, write_fd = os.pipe()
    reader = PipeInput(read_fd)
    yield reader, write_fd
    reader.close()
    for fd in (read_fd, write_fd):
        try:
            os.close(fd)
        except OSError:
            pass


def test_lines_come_whole_however_the_bytes_arrive(pipe: tuple[PipeInput, int],
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    reader, write_fd = pipe
    os.write(write_fd, b"first\nsec")
    assert reader.readline("you> ") == "first"
    os.write(write_fd, "ond, naïve\nlast without newline".encode())
    assert reader.readline("you> ") == "second, naïve"
    os.close(write_fd)
    assert reader.readline("you> ") == "last without newline"
    with pytest.raises(EOFError):
        reader.readline("you> ")
    assert capsys.readouterr().out == "you> " * 4


def test_a_ctrl_c_while_waiting_for_a_line_interrupts_the_wait(pipe: tuple[PipeInput, int]) -> None:
    reader, write_fd = pipe
    # As `agentix chat` sets it (the test run may have left another handler, e.g. an event loop's).
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    ctrl_c = threading.Timer(0.2, os.kill, (os.getpid(), signal.SIGINT))
    # Should the interrupt not end the wait, a line does, and the test fails instead of hanging.
    fallback = threading.Timer(30, os.write, (write_fd, b"no interrupt came\n"))
    ctrl_c.start()
    fallback.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            reader.readline("")
    finally:
        fallback.cancel()
        ctrl_c.join()
        signal.signal(signal.SIGINT, previous)


def test_close_gives_the_wakeup_fd_back() -> None:
    read_fd, write_fd = os.pipe()
    before = signal.set_wakeup_fd(-1)
    signal.set_wakeup_fd(before)
    reader = PipeInput(read_fd)
    reader.close()
    assert signal.set_wakeup_fd(before) == before
    os.close(read_fd)
    os.close(write_fd)
