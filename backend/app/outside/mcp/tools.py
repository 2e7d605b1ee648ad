"""The MCP endpoint's tools and the official ``mcp`` SDK's server that serves them
(backend/app/outside/mcp/endpoint.py says what each tool does and the rules they follow).

Imported on the endpoint's first request, not with the server: the SDK is most of
what a server process imports (about 0.7 CPU-s of its start).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import httpx
import mcp_types as types
from mcp.server.lowlevel import Server
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from starlette.requests import Request

from backend.app.core.logs import fields, get_logger
from backend.app.core.settings import Settings
from backend.app.core.wire import AcrossBody, RunBody, SnippetBody
from backend.app.outside.mcp import results as mcp_results
from backend.app.web import op_docs
from backend.app.web.local_api import CallerGone, LocalApi

log = get_logger("mcp")

_OP_DOCS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "name": {
            "type": "string",
            "maxLength": 200,
            "description": "A jaxpr primitive (`dot_general`, `pjit`), a StableHLO op "
            "(`stablehlo.add`) or an HLO opcode (`fusion`, `custom-call`).",
        },
        "kind": {
            "type": "string",
            "enum": list(op_docs.KINDS),
            "description": "Which text the name is from; without it, every kind that knows it.",
        },
    },
    "required": ["name"],
    "additionalProperties": False,
}


class ToolFailed(Exception):
    """A tool's error for the agent to read (``is_error``), with its structured body."""

    def __init__(self, text: str, body: dict[str, Any]) -> None:
        super().__init__(text)
        self.text, self.body = text, body


@dataclass(frozen=True)
class ToolSpec:
    name: str
    description: str
    input_schema: dict[str, Any]
    call: Callable[[LocalApi, Settings, dict[str, Any]], Awaitable[tuple[str, dict[str, Any]]]]
    read_only: bool = False


async def _ok(response: httpx.Response) -> Any:
    if response.status_code >= 400:
        raise ToolFailed(*mcp_results.error_of(response))
    return response.json()


async def _run(
    api: LocalApi, settings: Settings, args: dict[str, Any]
) -> tuple[str, dict[str, Any]]:
    response = await api.call("POST", "/api/v1/runs", json=args)
    answer = mcp_results.run_outputs((await _ok(response))["events"], settings.mcp_output_chars)
    answer["run_id"] = response.headers.get("x-run-id", "")
    return mcp_results.run_text(answer), answer


async def _across(
    api: LocalApi, settings: Settings, args: dict[str, Any]
) -> tuple[str, dict[str, Any]]:
    answer = await _ok(await api.call("POST", "/api/v1/across", json=args))
    capped = mcp_results.across_outputs(answer, settings.mcp_output_chars)
    return mcp_results.across_text(capped), capped


async def _share(
    api: LocalApi, settings: Settings, args: dict[str, Any]
) -> tuple[str, dict[str, Any]]:
    answer = await _ok(await api.call("POST", "/api/v1/snippets", json=args))
    return f"{answer['url']}\n(snippet {answer['id']}; the same request always gets it)", answer


async def _op_docs(
    api: LocalApi, settings: Settings, args: dict[str, Any]
) -> tuple[str, dict[str, Any]]:
    name, kind = args.get("name"), args.get("kind")
    if not isinstance(name, str) or not name.strip() or len(name) > 200:
        raise ToolFailed("name: a primitive's or op's name, 1-200 characters", {"field": "name"})
    if kind is not None and kind not in op_docs.KINDS:
        raise ToolFailed(f"kind: one of {list(op_docs.KINDS)}", {"field": "kind"})
    docs = op_docs.lookup(name, kind)
    if not docs:
        raise ToolFailed(
            f"no docs for {name!r}"
            + (
                f" as a {kind} name"
                if kind
                else " (not a jaxpr primitive, StableHLO op or HLO opcode)"
            ),
            {"error": "not_found", "name": name},
        )
    text = "\n\n".join(
        f"{d.title} ({d.kind})\n{d.summary}"
        + (f"\n{d.signature}" if d.signature else "")
        + (f"\nrules: {', '.join(d.transforms)}" if d.transforms else "")
        + (f"\n{d.url}" if d.url else "")
        for d in docs
    )
    return text, {"docs": [d.model_dump() for d in docs]}


async def _versions(
    api: LocalApi, settings: Settings, args: dict[str, Any]
) -> tuple[str, dict[str, Any]]:
    answer = await _ok(await api.call("GET", "/api/v1/backends"))
    versions: dict[str, dict[str, Any]] = {}
    for backend in answer.get("backends", []):
        for v in backend.get("versions", []):
            versions.setdefault(v["version"], v)
    rows = sorted(versions.values(), key=lambda v: v["version"])
    lines = []
    for v in rows:
        marks = [m for m, on in (("default", v["default"]), ("installed", v["installed"])) if on]
        libs = ", ".join(f"{lib['name']} {lib['version']}" for lib in v.get("libraries", []))
        lines.append(f"JAX {v['version']} ({', '.join(marks) or 'offered, not installed'})"
                     + (f": {libs}" if libs else ""))  # fmt: skip
    structured = {
        "versions": rows,
        "gpu_targets": answer.get("gpu_targets", []),
        "tpu_topologies": answer.get("tpu_topologies", []),
    }
    return "\n".join(lines) or "no JAX version is offered", structured


def _schema(model: type[Any]) -> dict[str, Any]:
    schema: dict[str, Any] = model.model_json_schema()
    return schema


TOOLS: tuple[ToolSpec, ...] = (
    ToolSpec(
        "run",
        "Run a JAX function through a pipeline of transformations (jit, grad, vmap...) "
        "and answer what JAX made of it: the jaxpr, StableHLO, optimised HLO, value, cost, "
        "timings... (`outputs`). `code` defines the function (`entry`, default `f`); `args` "
        "is a Python expression of its arguments. Each output is cut at the server's limit, "
        "with its total size and `truncated`.",
        _schema(RunBody),
        _run,
    ),
    ToolSpec(
        "across",
        "Run one request on several JAX versions (oldest first) and say, per output, the "
        "first version where it changed and the diff at each change: what a regression "
        "report needs.",
        _schema(AcrossBody),
        _across,
    ),
    ToolSpec(
        "share",
        "Store a run request as a snippet and answer its link (the playground page with it "
        "loaded); the same request always gets the same link.",
        _schema(SnippetBody),
        _share,
    ),
    ToolSpec(
        "op_docs",
        "The docs of a jaxpr primitive, StableHLO op or HLO opcode, as the playground shows "
        "them on hover: what it computes, how it is called, which transformations have rules "
        "for it, and a link.",
        _OP_DOCS_SCHEMA,
        _op_docs,
        read_only=True,
    ),
    ToolSpec(
        "versions",
        "The JAX versions this server offers (which is the default, which are installed) "
        "and the libraries (Flax, Optax, Equinox...) each one's runs may import.",
        {"type": "object", "properties": {}, "additionalProperties": False},
        _versions,
        read_only=True,
    ),
)
BY_NAME = {tool.name: tool for tool in TOOLS}


def make_server(settings: Settings, version: str) -> Server[Any]:
    async def list_tools(
        ctx: Any, params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(
            tools=[
                types.Tool(
                    name=t.name,
                    description=t.description,
                    input_schema=t.input_schema,
                    annotations=types.ToolAnnotations(
                        read_only_hint=t.read_only, open_world_hint=False
                    ),
                )
                for t in TOOLS
            ]
        )

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        tool = BY_NAME.get(params.name)
        if tool is None:
            return _failed(f"no tool {params.name!r}; the tools: {sorted(BY_NAME)}", {})
        request = ctx.request
        if not isinstance(request, Request):  # only served over HTTP (see mount_mcp)
            return _failed("this endpoint answers over Streamable HTTP only", {})
        api = LocalApi(request.scope["app"], request)
        try:
            text, structured = await tool.call(api, settings, dict(params.arguments or {}))
        except ToolFailed as exc:
            log.info("mcp.refused", extra=fields(tool=tool.name, error=exc.text[:200]))
            return _failed(exc.text, exc.body)
        except CallerGone:  # nobody reads this answer: its run was cancelled
            log.info("mcp.gone", extra=fields(tool=tool.name))
            return _failed("the client went away; the call was cancelled", {})
        return types.CallToolResult(
            content=[types.TextContent(text=text)], structured_content=structured
        )

    return Server(
        "jaxplay",
        version=version,
        instructions="jaxplay runs JAX functions and shows what JAX makes of them "
        "(jaxpr, StableHLO, HLO, values, timings) on several JAX versions. `run` a "
        "function, `share` it as a link, compare it `across` versions, look up an op "
        "with `op_docs`, list `versions`.",
        get_tool_input_schema=lambda name: BY_NAME[name].input_schema if name in BY_NAME else None,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )


def _failed(text: str, body: dict[str, Any]) -> types.CallToolResult:
    return types.CallToolResult(
        content=[types.TextContent(text=text)], structured_content=body, is_error=True
    )


def session_manager(settings: Settings, version: str) -> StreamableHTTPSessionManager:
    """The SDK's session manager for the tools; it serves requests while its ``run()`` is entered."""
    return StreamableHTTPSessionManager(
        app=make_server(settings, version),
        json_response=True,
        stateless=True,  # every POST stands alone: any replica can answer it
        # Host and Origin are checked by jaxplay's own rules (HostCheck, _OriginCheck)
        security_settings=TransportSecuritySettings(enable_dns_rebinding_protection=False),
        max_request_body_size=settings.max_body_bytes,
    )
