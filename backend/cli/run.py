"""``jaxplay run``: a function through a pipeline, in the local jailed pool or on a
server (``--server``).

It imports little on purpose: with ``--server`` the command is a thin client, and
what it costs to start is most of a run's wall time there (docs/benchmarks.md). Neither
pydantic, the protocol's models nor the server's settings are imported on that path:
the server validates the request and says what is wrong with it; the local path
validates it here, before any jail starts.
"""

from __future__ import annotations

import json
import os
import re
import sys
from collections.abc import AsyncIterator, Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from backend.cli.render.events import render_event
from sandbox.protocol.checks import CHECK_NAMES
from sandbox.protocol.vocabulary import OUTPUTS

if TYPE_CHECKING:
    from sandbox.protocol.requests import RunRequest

#: exit codes: 0 the run ended ok, 1 it ended otherwise, 2 the request was bad
EXIT_BAD_REQUEST = 2


def _fail(message: str) -> None:
    typer.echo(f"jaxplay: {message}", err=True)
    raise typer.Exit(EXIT_BAD_REQUEST)


def _parse_transform(text: str) -> dict[str, Any]:
    """``grad`` or a JSON object such as ``{"name": "vmap", "in_axes": [0, null]}``."""
    if text.lstrip().startswith("{"):
        try:
            value = json.loads(text)
        except ValueError as exc:
            _fail(f"--transform {text!r} is not valid JSON: {exc}")
        if not isinstance(value, dict):
            _fail(f"--transform {text!r} must be a JSON object")
        return value
    return {"name": text}


def _parse_mesh(text: str) -> dict[str, Any]:
    """``2x2:x,y`` (sizes, then axis names; ``:explicit,auto`` after them sets the
    axis types) or the request's JSON object."""
    if text.lstrip().startswith("{"):
        return dict(_parse_json("--mesh", text, dict))
    shape, _, rest = text.partition(":")
    names, _, types = rest.partition(":")
    try:
        sizes = [int(s) for s in re.split(r"[x,]", shape) if s]
    except ValueError:
        _fail(f"--mesh {text!r}: write it like 2x2:x,y (sizes, then axis names)")
    mesh: dict[str, Any] = {"shape": sizes, "axis_names": [n for n in names.split(",") if n]}
    if types:
        mesh["axis_types"] = types.split(",")
    return mesh


def _parse_json(option: str, text: str, kind: type) -> Any:
    try:
        value = json.loads(text)
    except ValueError as exc:
        _fail(f"{option} {text!r} is not valid JSON: {exc}")
    if not isinstance(value, kind):
        _fail(f"{option} {text!r} must be a JSON {kind.__name__}")
    return value


def _parse_specs(option: str, texts: list[str] | None) -> list[Any] | None:
    """Each ``--in-sharding``/``--out-sharding``: a PartitionSpec as JSON
    (``'["x", null]'``), or ``null`` for replicated."""
    if not texts:
        return None
    return [None if t.strip() == "null" else _parse_json(option, t, list) for t in texts]


def _build_request(
    file: Path | None, request_path: str | None, overrides: dict[str, Any]
) -> dict[str, Any]:
    """The request as the user gave it (FILE or --request, then the flags over it),
    not yet checked: see ``_checked``."""
    if request_path is not None:
        if file is not None:
            _fail("give either FILE or --request, not both")
        try:
            raw = sys.stdin.read() if request_path == "-" else Path(request_path).read_text()
            data = json.loads(raw)
        except (OSError, ValueError) as exc:
            _fail(f"cannot read the request {request_path}: {exc}")
        if not isinstance(data, dict):
            _fail("the request must be a JSON object")
    elif file is not None:
        try:
            data = {"code": file.read_text()}
        except OSError as exc:
            _fail(f"cannot read {file}: {exc}")
    else:
        _fail("give a FILE.py to run, or --request FILE|-")
    data.update({k: v for k, v in overrides.items() if v is not None})
    return data


def _checked(data: dict[str, Any]) -> RunRequest:
    """The request checked here, for the local pool (a server checks its own)."""
    from pydantic import ValidationError

    from backend.cli.common import validation_problems
    from sandbox.protocol.requests import RunRequest

    try:
        return RunRequest.model_validate(data)
    except ValidationError as exc:
        _fail("invalid request: " + validation_problems(exc, "request"))
    raise AssertionError("unreachable")


def _parse_libraries(given: list[str] | None) -> dict[str, str] | None:
    """``--library optax=0.2.6`` (repeatable): library -> version."""
    if not given:
        return None
    chosen: dict[str, str] = {}
    for item in given:
        name, sep, version = item.partition("=")
        if not sep or not name or not version:
            _fail(f"--library {item!r}: write NAME=VERSION (optax=0.2.6)")
        chosen[name.strip()] = version.strip()
    return chosen


async def _local_events(request: RunRequest) -> AsyncIterator[dict[str, Any]]:
    """The run in the local jailed pool: the ``auto`` pool, which refuses to run without
    the jail unless JAXPLAY_UNSAFE_NO_JAIL is set, and then says so loudly."""
    from backend.app.core.settings import Settings
    from backend.app.relay.pools import make_pool
    from sandbox.pool.base import ChoosesLibraries, RunsVersions

    local: dict[str, Any] = {"pool": "auto", "queue_url": None, "pool_options": {}}
    _, pool = make_pool(Settings().model_copy(update=local))
    if isinstance(pool, RunsVersions):
        # a version not installed: refused before any jail starts
        pool.resolve_version(request.jax_version)
    if isinstance(pool, ChoosesLibraries):  # a library version not offered: the same
        pool.resolve_libraries(request.jax_version, request.libraries)
    await pool.start()
    try:
        handle = await pool.submit(request, tenant="cli")
        async for event in handle.events():
            yield event
    finally:
        await pool.close()


def _drive(events: Iterable[dict[str, Any]], show: Callable[[dict[str, Any]], None]) -> str:
    """Show each event; the run's status (``done``'s, else error)."""
    status = "error"
    for event in events:
        show(event)
        if event.get("type") == "done":
            status = event.get("status", "error")
    return status


async def _drive_local(
    events: AsyncIterator[dict[str, Any]], show: Callable[[dict[str, Any]], None]
) -> str:
    status = "error"
    try:
        async for event in events:
            show(event)
            if event.get("type") == "done":
                status = event.get("status", "error")
    finally:
        # close the generator here, in its own loop, even when printing failed
        aclose = getattr(events, "aclose", None)
        if aclose is not None:
            await aclose()
    return status


def run(
    file: Annotated[
        Path | None, typer.Argument(help="A Python file defining the function.")
    ] = None,
    entry: Annotated[
        str | None, typer.Option(help="The function to transform (default f).")
    ] = None,
    args: Annotated[
        str | None, typer.Option("--args", help="Example arguments, a Python expression.")
    ] = None,
    transform: Annotated[
        list[str] | None,
        typer.Option(
            help='A transform, in order: a name (grad) or JSON ({"name": "vmap", "in_axes": 0}).'
        ),
    ] = None,
    output: Annotated[
        list[str] | None, typer.Option(help=f"Outputs to produce: {', '.join(OUTPUTS)}.")
    ] = None,
    backend: Annotated[str | None, typer.Option(help="cpu, gpu, tpu or auto.")] = None,
    devices: Annotated[int | None, typer.Option(help="How many devices the run sees.")] = None,
    timeout: Annotated[
        float | None, typer.Option("--timeout", help="Wall-clock limit in seconds.")
    ] = None,
    request: Annotated[
        str | None, typer.Option("--request", help="A whole run request: FILE.json or - for stdin.")
    ] = None,
    jax_version: Annotated[
        str | None,
        typer.Option(help="The JAX version to run on (default: the default; `jaxplay versions`)."),
    ] = None,
    library: Annotated[
        list[str] | None,
        typer.Option(help="Another version of a library: optax=0.2.6 (`jaxplay versions`)."),
    ] = None,
    mesh: Annotated[
        str | None,
        typer.Option(help="A device mesh: 2x2:x,y (sizes:names[:types]) or its JSON object."),
    ] = None,
    in_sharding: Annotated[
        list[str] | None,
        typer.Option(help="A PartitionSpec per argument, in order: '[\"x\", null]' or null."),
    ] = None,
    out_sharding: Annotated[
        list[str] | None,
        typer.Option(help="A PartitionSpec per output (one: for every output)."),
    ] = None,
    lowering_platform: Annotated[
        list[str] | None,
        typer.Option(help="Lower for this platform (tpu, cuda) without it: its StableHLO."),
    ] = None,
    check: Annotated[
        list[str] | None,
        typer.Option(help=f"A one-click check of the pipeline: {', '.join(CHECK_NAMES)}."),
    ] = None,
    grad_order: Annotated[
        list[int] | None, typer.Option(help="An order for --check grad (default 1).")
    ] = None,
    grad_mode: Annotated[
        list[str] | None, typer.Option(help="A mode for --check grad: fwd, rev (default both).")
    ] = None,
    pallas_interpret: Annotated[
        str | None,
        typer.Option(help="A pallas_call without interpret= on the CPU: auto or tpu_races."),
    ] = None,
    cost_before: Annotated[
        bool,
        typer.Option(
            "--cost-before",
            help="The cost output's figures before optimisation too (a second conversion "
            "of the module to HLO: 15-45 % of the compile).",
        ),
    ] = False,
    value_from: Annotated[
        int | None,
        typer.Option(
            help="The value output's leaves from this index (flatten order): the next page "
            "of a value of more leaves than one event describes, or their data."
        ),
    ] = None,
    export_shape: Annotated[
        list[str] | None,
        typer.Option(
            help="The export output: a symbolic shape per argument ('b, 3'; null: its own)."
        ),
    ] = None,
    export_platform: Annotated[
        list[str] | None,
        typer.Option(
            help="The export output's platforms: cpu, cuda, rocm, tpu (default: the worker's)."
        ),
    ] = None,
    server: Annotated[
        str | None, typer.Option(help="Run on a jaxplay server at this URL instead of locally.")
    ] = None,
    token: Annotated[
        str | None,
        typer.Option(
            envvar="JAXPLAY_TOKEN",
            help="With --server: an API token its operator issued; the token's process "
            "may be kept for its next runs. Without one, the anonymous session below.",
        ),
    ] = None,
    session: Annotated[
        bool,
        typer.Option(
            "--session/--no-session",
            help="With --server and no token: keep an anonymous session the server "
            "issues in ~/.cache/jaxplay (XDG_CACHE_HOME), so this user's runs share one "
            "warm process there, as a page's edits do. --no-session: each run is the "
            "address's, in a single-use jail.",
        ),
    ] = True,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print the events as JSON lines.")
    ] = False,
) -> None:
    """Run a function through a pipeline of transformations and show what JAX makes of it."""
    overrides: dict[str, Any] = {
        "entry": entry,
        "args": args,
        "transforms": [_parse_transform(t) for t in transform] if transform else None,
        "outputs": output or None,
        "backend": backend,
        "devices": devices,
        "timeout_s": timeout,
        "jax_version": jax_version,
        "libraries": _parse_libraries(library),
        "mesh": _parse_mesh(mesh) if mesh else None,
        "in_shardings": _parse_specs("--in-sharding", in_sharding),
        "out_shardings": _parse_specs("--out-sharding", out_sharding),
        "lowering_platforms": lowering_platform or None,
        "pallas_interpret": pallas_interpret,
        "cost_before": cost_before or None,
        "value_from": value_from,
        "checks": check or None,
        "grad_orders": grad_order or None,
        "grad_modes": grad_mode or None,
        "export_shapes": [None if s == "null" else s for s in export_shape]
        if export_shape
        else None,
        "export_platforms": export_platform or None,
    }
    data = _build_request(file, request, overrides)

    def show(event: dict[str, Any]) -> None:
        if as_json:
            typer.echo(json.dumps(event))
        elif (text := render_event(event)) is not None:
            typer.echo(text)

    if server:
        from backend.cli.client.rest import stream_run
        from backend.cli.client.session_store import SessionStore, server_key, session_events

        try:
            server_key(server)
        except ValueError as exc:
            typer.echo(f"jaxplay: --server: {exc}", err=True)
            raise typer.Exit(EXIT_BAD_REQUEST)
        events: Iterable[dict[str, Any]]
        if token or not session:
            events = stream_run(server, data, token=token)
        else:

            def note(text: str) -> None:
                typer.echo(text, err=True)

            events = session_events(server, data, store=SessionStore(note=note), note=note)

        def go() -> str:
            return _drive(events, show)
    else:
        local = _checked(data)

        def go() -> str:
            import asyncio

            return asyncio.run(_drive_local(_local_events(local), show))

    try:
        status = go()
    except KeyboardInterrupt:
        raise typer.Exit(130)
    except BrokenPipeError:
        # the reader went away (`| head`): stop quietly, as command-line tools do
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        raise typer.Exit(1)
    except (ConnectionError, OSError) as exc:
        typer.echo(f"jaxplay: cannot reach {server or 'the local worker'}: {exc}", err=True)
        raise typer.Exit(1)
    except Exception as exc:
        from backend.app.relay.pools import PoolConfigError
        from backend.cli.client.rest import ServerError
        from sandbox.environments.library_choices import LibraryUnavailable
        from sandbox.pool.versioned import VersionUnavailable

        if isinstance(exc, PoolConfigError):  # e.g. no jail: what is missing
            typer.echo(f"jaxplay: {exc.__cause__ or exc}", err=True)
            raise typer.Exit(1)
        if isinstance(exc, (VersionUnavailable, LibraryUnavailable)):
            typer.echo(f"jaxplay: {exc}", err=True)
            raise typer.Exit(EXIT_BAD_REQUEST)
        if not isinstance(exc, ServerError):
            raise
        typer.echo(f"jaxplay: {exc}", err=True)
        # the server refused the request itself (malformed, too large): as a local bad request
        raise typer.Exit(EXIT_BAD_REQUEST if exc.status in (413, 422) else 1)
    raise typer.Exit(0 if status == "ok" else 1)


def register(app: typer.Typer) -> None:
    """Add ``run`` to the ``jaxplay`` command line."""
    app.command()(run)
