"""A real MCP server for the MCP client tests, written with the official ``mcp`` package.

Runs in its own process (asyncio, never under gevent)::

    python3 tests/support/mcp_server.py stdio
    python3 tests/support/mcp_server.py http     # streamable HTTP on 127.0.0.1
    python3 tests/support/mcp_server.py sse      # the legacy HTTP+SSE transport

For ``http`` and ``sse`` the server binds port 0 first and prints ``PORT <n>`` on stdout,
so a test learns the port without polling (the socket already listens at that point).

Tools: echo, add (structured), fail (isError), crash (exits mid-call), slow, garbage (writes
non-JSON lines on stdout, stdio only), grow (adds a tool and sends tools/list_changed),
picture (image content), env_probe, where (cwd and process group), spawn_child (a grandchild
that sleeps), plus filler tools so that tools/list needs several pages (PAGE tools a page).
"""

import asyncio
import base64
import os
import socket
import subprocess
import sys

from mcp.server import stdio as mcp_stdio
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.utilities.types import Image
from mcp_types import ListToolsResult

PAGE = 4
FILLERS = 5
# A 1x1 PNG.
PIXEL = base64.b64decode("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==")


class PagedServer(MCPServer):
    """tools/list answers PAGE tools at a time with a nextCursor."""

    async def _handle_list_tools(self, ctx, params):
        tools = await self.list_tools()
        start = int(params.cursor) if params is not None and params.cursor else 0
        page = tools[start:start + PAGE]
        more = start + PAGE < len(tools)
        return ListToolsResult(tools=page, next_cursor=str(start + PAGE) if more else None)


server = PagedServer("term2-test-server")


@server.tool(description="Echo the text back.")
def echo(text: str) -> str:
    return f"echo: {text}"


@server.tool(description="Add two integers.")
def add(a: int, b: int) -> int:
    return a + b


@server.tool(description="Always fails with the given message.")
def fail(message: str) -> str:
    raise ToolError(message)


@server.tool(description="Exit the server process in the middle of the call.")
def crash() -> str:
    sys.stderr.write("boom: crashing on purpose\n")
    sys.stderr.flush()
    os._exit(3)


@server.tool(description="Sleep for a while, then answer.")
async def slow(seconds: float) -> str:
    await asyncio.sleep(seconds)
    return f"slept {seconds}"


@server.tool(description="Write lines that are not JSON-RPC on stdout, then answer.")
def garbage() -> str:
    # The mcp stdio transport serves the wire from a private duplicate of fd 1 (fd 1 itself
    # is diverted to stderr), so write the garbage where the client reads.
    claim = mcp_stdio._claims.get(1)
    fd = claim.private_fd if claim is not None and claim.private_fd is not None else 1
    os.write(fd, b"this is not json\n\xff\xfe not utf-8\n[1, 2]\n{\"jsonrpc\": \"2.0\"}\n")
    return "garbage sent"


@server.tool(description="Add the tool 'extra' and announce it with tools/list_changed.")
async def grow(ctx: Context) -> str:
    if "extra" not in {t.name for t in await server.list_tools()}:
        server.add_tool(lambda: "extra here", name="extra", description="Added by grow.")
    await ctx.session.send_tool_list_changed()
    return "grown"


@server.tool(description="Return a one-pixel PNG and a caption.")
def picture() -> list:
    return ["a pixel", Image(data=PIXEL, format="png")]


@server.tool(description="The value of an environment variable, or <unset>.")
def env_probe(name: str) -> str:
    return os.environ.get(name, "<unset>")


@server.tool(description="The server's cwd, pid and process group.")
def where() -> dict:
    return {"cwd": os.getcwd(), "pid": os.getpid(), "pgid": os.getpgid(0)}


@server.tool(description="Start a grandchild process that sleeps; returns its pid.")
def spawn_child() -> int:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"],
                             stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
    return child.pid


def _filler(i):
    def filler() -> str:
        return f"filler {i}"
    return filler


for _i in range(FILLERS):
    server.add_tool(_filler(_i), name=f"filler_{_i}", description=f"Filler tool {_i}.")


def _serve_http(app):
    import uvicorn

    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    print(f"PORT {sock.getsockname()[1]}", flush=True)
    config = uvicorn.Config(app, log_level="warning", lifespan="on")
    asyncio.run(uvicorn.Server(config).serve(sockets=[sock]))


def main():
    mode = sys.argv[1] if len(sys.argv) > 1 else "stdio"
    if mode == "stdio":
        server.run("stdio")
    elif mode == "http":
        _serve_http(server.streamable_http_app())
    elif mode == "sse":
        _serve_http(server.sse_app())
    else:
        sys.exit(f"unknown mode {mode}")


def _exit_now():
    """Exit 0 without the interpreter tearing down the mcp/pydantic heap (about 0.25 s of
    CPU per server start, paid dozens of times a test run)."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(0)


if __name__ == "__main__":
    main()
    _exit_now()
