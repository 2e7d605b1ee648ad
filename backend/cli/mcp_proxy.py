"""``jaxplay mcp``: jaxplay's MCP tools for a local client that speaks stdio (Claude
Desktop, editors), proxied to a jaxplay server's ``/mcp`` endpoint.

    jaxplay mcp --server https://jaxplay.example [--token TOKEN]

It serves MCP on its standard input and output and forwards each ``tools/list`` and
``tools/call`` to the server (Streamable HTTP, the official SDK's client), so the tools,
their schemas, the limits and the tenancy are the server's: the token (or, without one,
this machine's address) is who runs. It runs nothing itself and never imports JAX. A
client that speaks Streamable HTTP needs no proxy: point it at ``SERVER/mcp``.
Registered on the ``jaxplay`` typer app by ``register(app)``.
"""

from __future__ import annotations

from typing import Annotated, Any

import typer

#: the server when --server is not given
SERVER_VARIABLE = "JAXPLAY_SERVER"
TOKEN_VARIABLE = "JAXPLAY_TOKEN"


async def proxy(server: str, token: str | None) -> None:
    import httpx2
    import mcp_types as types
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client
    from mcp.server.lowlevel import Server
    from mcp.server.stdio import stdio_server

    headers = {"authorization": f"Bearer {token}"} if token else {}
    http = httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(660.0))
    url = server.rstrip("/") + "/mcp"
    async with Client(streamable_http_client(url, http_client=http)) as remote:

        async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
            return await remote.list_tools(cache_mode="refresh")

        async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
            return await remote.call_tool(params.name, dict(params.arguments or {}))

        local: Server[Any] = Server("jaxplay", on_list_tools=list_tools, on_call_tool=call_tool)
        async with stdio_server() as (read, write):
            await local.run(read, write, local.create_initialization_options())


def mcp(
    server: Annotated[
        str | None,
        typer.Option(help="The jaxplay server to proxy to.", envvar=SERVER_VARIABLE),
    ] = None,
    token: Annotated[
        str | None,
        typer.Option(help="An API token the server's operator issued.", envvar=TOKEN_VARIABLE),
    ] = None,
) -> None:
    """Serve jaxplay's MCP tools over stdio for a local MCP client, proxied to a server."""
    import anyio

    url = server
    if not url:
        typer.echo(f"jaxplay mcp: give --server URL (or set {SERVER_VARIABLE})", err=True)
        raise typer.Exit(2)
    if not url.startswith(("http://", "https://")):
        typer.echo(f"jaxplay mcp: --server {url!r} is not an http(s) URL", err=True)
        raise typer.Exit(2)
    anyio.run(proxy, url, token)


def register(app: typer.Typer) -> None:
    app.command(name="mcp")(mcp)
