"""`agentix chat`: talk to an agent in the terminal over the chat API, turn by turn.

Each line typed is posted to the conversation; its run's stream is followed and shown as it comes.
Ctrl-C stops the run going (the gateway keeps what was said so far as an `interrupted` message);
a second Ctrl-C, or end of input, leaves."""

from __future__ import annotations

import argparse
import json
import signal
import sys
from dataclasses import dataclass, field
from typing import Any

import httpx

from agentix.chat_input import PipeInput
from agentix.chat_view import ChatView
from agentix.run import problem_text, resolve_token
from agentix.sse import follow
from shared.errors import AgentixError

HELP = ("commands: /new (a new conversation) · /mode plan|react|direct · /model ID (no ID: the default) · "
        "/quit · Ctrl-C stops an answer, Ctrl-C again or Ctrl-D leaves")
MODES = ("plan", "react", "direct")
PROMPT = "you> "


class Refused(AgentixError):
    """The gateway answered with a problem; its text is the message, its status the gateway's."""

    code = "refused"

    def __init__(self, status: int, text: str) -> None:
        super().__init__(text, http_status=status)
        self.status = status


@dataclass
class Chat:
    client: httpx.Client
    headers: dict[str, str]
    view: ChatView = field(default_factory=ChatView)
    conversation: dict[str, Any] = field(default_factory=dict)
    # Input is not a terminal: lines come through this reader (a Ctrl-C is never lost waiting for
    # one), and each is repeated so the transcript reads as a chat.
    pipe: PipeInput | None = None
    last_run_ended: str | None = None  # this chat's last run, once its `done` was seen

    def call(self, method: str, path: str, expect: int, body: dict[str, Any] | None = None) -> dict[str, Any]:
        resp = self.client.request(method, f"/api/v1{path}", json=body, headers=self.headers)
        if resp.status_code != expect:
            raise Refused(resp.status_code, problem_text(resp))
        return resp.json() if resp.content else {}

    def read(self, prompt: str) -> str:
        """A line from the user (EOFError at the end of input)."""
        self.view.end_line()
        if self.pipe is None:
            return input(prompt).strip()
        text = self.pipe.readline(prompt)
        print(text, flush=True)
        return text.strip()

    # ------------------------------------------------------------------ conversations

    def start(self, conversation_id: str | None, mode: str | None, model: str | None) -> None:
        if conversation_id is None:
            self.new(mode, model)
            return
        self.conversation = self.call("GET", f"/conversations/{conversation_id}", 200)
        changes = {k: v for k, v in (("mode", mode), ("model", model)) if v is not None}
        if changes:
            self.conversation = self.call("PATCH", f"/conversations/{conversation_id}", 200, changes)
        self.show_recent()

    def new(self, mode: str | None, model: str | None) -> None:
        body = {k: v for k, v in (("mode", mode), ("model", model)) if v}
        self.conversation = self.call("POST", "/conversations", 201, body)
        self.last_run_ended = None
        self.view.line(f"conversation {self.describe()}")

    def describe(self) -> str:
        c = self.conversation
        return f"{c['id']} (mode {c['mode']}, model {c.get('model') or 'default'})"

    def show_recent(self, count: int = 6) -> None:
        page = self.call("GET", f"/conversations/{self.conversation['id']}/messages?order=desc&limit={count}", 200)
        self.view.line(f"conversation {self.describe()}" + (", last messages:" if page["items"] else ""))
        for message in reversed(page["items"]):
            who = PROMPT if message["role"] == "user" else "agent: "
            mark = f" [{message['message_type']}]" if message["message_type"] != "text" else ""
            self.view.line(f"  {who}{message['content'][:200]}{mark}")

    def patch(self, key: str, value: str) -> None:
        if key == "mode" and value not in MODES:
            raise Refused(422, f"mode is one of {', '.join(MODES)}")
        self.conversation = self.call("PATCH", f"/conversations/{self.conversation['id']}", 200, {key: value})
        self.view.line(f"conversation {self.describe()}")

    def command(self, line: str) -> bool:
        """Run a /command; False when it asks to leave."""
        name, _, arg = line[1:].partition(" ")
        arg = arg.strip()
        if name in ("quit", "exit", "q"):
            return False
        if name == "new":
            self.new(self.conversation.get("mode"), self.conversation.get("model"))
        elif name in ("mode", "model") and (arg or name == "model"):
            self.patch(name, arg)  # an empty model clears it: the failover chain answers
        else:
            self.view.line(HELP)
        return True

    # ------------------------------------------------------------------ a turn

    def say(self, text: str) -> bool:
        """Post `text` and follow its run to the end; False when the user leaves meanwhile."""
        accepted = self.call("POST", f"/conversations/{self.conversation['id']}/messages", 202, {"text": text})
        return self.follow_run(accepted["run"]["id"])

    def follow_run(self, run_id: str) -> bool:
        self.view.start_run()
        last_id: str | None = None
        stopping = False
        while True:
            try:
                for ev in follow(self.client, f"/api/v1/runs/{run_id}/events", self.headers, after=last_id):
                    last_id = ev.id or last_id
                    if ev.event == "approval.request" and not self.decide(run_id, ev.data):
                        return False
                    if ev.event == "done":
                        self.report(ev.data, stopping)
                        self.last_run_ended = run_id
                        return True
                    if ev.event == "queued" and self.behind_own_last_run(ev.data):
                        continue
                    self.view.show(ev.event, ev.data)
                self.view.line("! the stream ended before the run did")
                return True
            except KeyboardInterrupt:
                if stopping:
                    return False  # a second Ctrl-C: leave, the run is being stopped anyway
                stopping = True
                self.view.line("⏹ stopping the run… (Ctrl-C again leaves)")
                try:
                    self.call("POST", f"/runs/{run_id}/cancel", 202)
                except Refused:
                    pass  # it ended meanwhile: its `done` follows

    def behind_own_last_run(self, queued: dict[str, Any]) -> bool:
        """The run ahead is the one whose answer was just shown: the gateway records its end a
        moment after streaming it, so the new run waits that moment. Nothing to tell the user."""
        return queued.get("position") == 1 and self.last_run_ended is not None

    def decide(self, run_id: str, d: dict[str, Any]) -> bool:
        """Ask the user about an approval the run waits for; False when input ended instead."""
        if d.get("tool"):
            question = f"allow {d['tool']}({json.dumps(d.get('args', {}))[:160]})? [y/n] "
        else:
            if not self.view.plan_shown:
                self.view.line(f"⏸ {d.get('message') or 'the run waits for approval'}")
            question = "go ahead? [y/n] "
        try:
            answer = self.read(question).lower()
        except EOFError:
            self.view.line(f"the run waits; answer later with: agentix approve {run_id} [--reject]")
            return False
        self.send_decision(run_id, "approve" if answer in ("y", "yes") else "reject")
        return True

    def send_decision(self, run_id: str, decision: str) -> None:
        # The gateway takes it as soon as the run's log says it waits, even before its recorder
        # has caught up, so one call is enough.
        try:
            self.call("POST", f"/runs/{run_id}/approval", 202, {"decision": decision})
        except Refused as exc:
            self.view.line(str(exc))

    def report(self, done: dict[str, Any], stopped: bool) -> None:
        """How the run ended, once its answer (or what there was of it) has been shown."""
        status = done.get("status")
        if status == "done":
            if not self.view.answered and done.get("output") is not None:
                output = done["output"]
                self.view.line(f"agent: {output if isinstance(output, str) else json.dumps(output)}")
            self.view.end_line()
        elif stopped:
            kept = "the partial answer is kept in the conversation" if self.view.answered else "nothing was said yet"
            self.view.line(f"⏹ stopped — {kept}")
        elif status == "rejected":
            self.view.line("✗ not approved: the run ended")
        else:
            self.view.line(f"✗ {status}: {done.get('error') or ''}".rstrip(": "))


def _loop(chat: Chat) -> int:
    leave_on_interrupt = False  # set by a Ctrl-C: the next one leaves
    while True:
        try:
            line = chat.read(PROMPT)
        except EOFError:
            chat.view.line("")
            return 0
        except KeyboardInterrupt:
            if leave_on_interrupt:
                chat.view.line("")
                return 0
            leave_on_interrupt = True
            chat.view.line("\n(Ctrl-C again or Ctrl-D leaves)")
            continue
        leave_on_interrupt = False
        if not line:
            continue
        try:
            if not (chat.command(line) if line.startswith("/") else chat.say(line)):
                return 0
        except Refused as exc:
            chat.view.line(str(exc))
        except httpx.HTTPError as exc:  # the gateway may be back for the next line
            chat.view.line(f"! cannot reach the gateway: {exc}")
        except KeyboardInterrupt:  # between the run's end and the prompt, or while posting
            leave_on_interrupt = True
            chat.view.line("\n(Ctrl-C again or Ctrl-D leaves)")


def chat_command(args: argparse.Namespace) -> int:
    # Ctrl-C must reach us as KeyboardInterrupt even when started with SIGINT ignored (`nohup`, `&`).
    signal.signal(signal.SIGINT, signal.default_int_handler)
    headers = {"Authorization": f"Bearer {resolve_token(args.token, args.data_dir)}"}
    base = args.url.rstrip("/")
    pipe = None if sys.stdin.isatty() else PipeInput()
    with httpx.Client(base_url=base, timeout=30) as client:
        chat = Chat(client, headers, pipe=pipe)
        try:
            chat.start(args.conversation, args.mode, args.model)
            chat.view.line(HELP)
            return _loop(chat)
        except httpx.HTTPError as exc:
            print(f"cannot reach {base}: {exc}", file=sys.stderr)
            return 2
        except Refused as exc:
            print(str(exc), file=sys.stderr)
            return 1
        except KeyboardInterrupt:
            chat.view.line("")
            return 0
        finally:
            if pipe is not None:
                pipe.close()
