"""A third-party MCP server for cadre's tests: the official Python SDK's
FastMCP (`MCPServer` since the SDK's 2.0), over stdio. `.ci/run` installs
the SDK (`pip install mcp`)."""

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
    server.run()
