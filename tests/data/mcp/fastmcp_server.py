"""A third-party MCP server for cadre's tests: the official Python SDK's
FastMCP (`MCPServer` since the SDK's 2.0), over stdio, or over streamable
HTTP at http://127.0.0.1:PORT/mcp with `--http PORT`. `.ci/run` installs
the SDK (`pip install mcp`)."""

import inspect
import sys

from mcp.types import ToolAnnotations

try:
    from mcp.server.mcpserver import MCPServer as Server
except ImportError:
    from mcp.server.fastmcp import FastMCP as Server

server = Server("notes")


@server.tool(annotations=ToolAnnotations(readOnlyHint=True))
def read_note(path: str) -> str:
    """Reads a text file."""
    with open(path, encoding="utf-8") as f:
        return f.read()


@server.tool(annotations=ToolAnnotations(readOnlyHint=False))
def write_note(path: str, text: str) -> str:
    """Writes a text file."""
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)
    return f"wrote {len(text)} characters to {path}"


@server.tool(annotations=ToolAnnotations(readOnlyHint=True))
def multiply(a: int, b: int) -> int:
    """Multiplies two integers."""
    return a * b


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--http":
        port = int(sys.argv[2])
        accepts = inspect.signature(server.run_streamable_http_async).parameters
        if "port" in accepts:
            server.run(transport="streamable-http", host="127.0.0.1", port=port)
        else:
            # The SDK before 2.0 reads the address from its settings.
            server.settings.host, server.settings.port = "127.0.0.1", port
            server.run(transport="streamable-http")
    else:
        server.run()
