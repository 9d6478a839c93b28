"""A tiny stdio MCP server (the `mcp` SDK's `MCPServer`) for the bridge's stdio tests, run by the
bridge in the sandbox:

    python tests/support/mcp_stdio_server.py      # speaks MCP on stdin/stdout

`add` adds; `boot` says which start of the process answers (a random id drawn at start); `note`
writes a line to a file in its working directory and returns the file's lines (the directory
outlives a restart); `reach` says whether a TCP connection to host:port opens (no network in the
sandbox); `ask` asks the client's model (sampling); `die` ends the process at once (the bridge
restarts it)."""

from __future__ import annotations

import os
import secrets
import socket
from pathlib import Path

from mcp.server.mcpserver import Context, MCPServer
from mcp_types import SamplingMessage, TextContent

BOOT = secrets.token_hex(8)
server = MCPServer("agentix-test-stdio")


@server.tool(description="Add two integers.")
def add(a: int, b: int) -> int:
    return a + b


@server.tool(description="Which start of the server process answers.")
def boot() -> str:
    return BOOT


@server.tool(description="Append a line to notes.txt in the working directory; all its lines.")
def note(line: str) -> list[str]:
    path = Path("notes.txt")
    with path.open("a") as out:
        out.write(line + "\n")
    return [*path.read_text().splitlines(), f"cwd={os.getcwd()}"]


@server.tool(description="Whether a TCP connection to host:port opens.")
def reach(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=2):
            return True
    except OSError:
        return False


@server.tool(description="Ask the client's model (sampling) and return its answer.")
async def ask(question: str, ctx: Context) -> str:
    answer = await ctx.session.create_message(
        [SamplingMessage(role="user", content=TextContent(type="text", text=question))],
        max_tokens=50, system_prompt="Answer in one word.")  # fmt: skip
    content = answer.content
    return content.text if isinstance(content, TextContent) else repr(content)


@server.tool(description="End the server process at once.")
def die() -> str:
    os._exit(3)


if __name__ == "__main__":
    server.run("stdio")
