"""``jaxplay versions``: the JAX versions this machine runs, and installing more.

    jaxplay versions                 # offered and installed versions, the default marked
    jaxplay versions add 0.10.2 ...  # install, each in its own environment, with progress
    jaxplay versions add --configured  # those JAXPLAY_JAX_VERSIONS lists (scripts/setup.sh)
    jaxplay versions lock 0.10.2     # pin a version's packages by hash (review, commit)
    jaxplay versions remove 0.10.2
    jaxplay versions libraries       # the libraries (Flax, Optax...) each version offers

Environments live under ``JAXPLAY_JAX_VERSIONS_DIR`` (sandbox/environments/versions.py says what
each holds). Installing is the operator's act, here: a run never installs anything.
``add`` installs exactly a committed lock's wheels (pip ``--require-hashes``), within
a time limit. Registered on the ``jaxplay`` typer app by ``register(app)``. This module
never imports JAX.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Annotated

import typer

from sandbox.environments.versions import INSTALL_TIMEOUT_S

if TYPE_CHECKING:
    from backend.app.core.settings import Settings

versions_app = typer.Typer(
    help="The JAX versions runs may pick (`jax_version`): list, add, lock, remove.",
    no_args_is_help=False,
    add_completion=False,
)


def _settings() -> Settings:
    from backend.app.core.settings import Settings

    return Settings()


@versions_app.callback(invoke_without_command=True)
def versions(
    ctx: typer.Context,
    as_json: Annotated[bool, typer.Option("--json", help="One JSON object per version.")] = False,
) -> None:
    """List the offered and installed JAX versions (the default is marked)."""
    if ctx.invoked_subcommand is not None:
        return
    from dataclasses import asdict

    from sandbox.environments.versions import listing

    settings = _settings()
    rows = listing(settings.jax_versions_dir)
    if as_json:
        for row in rows:
            typer.echo(json.dumps(asdict(row)))
        return
    typer.echo(f"{'version':<10} {'state':<13} {'python':<22} note")
    for row in rows:
        state = "default" if row.default else ("installed" if row.installed else "installable")
        typer.echo(f"{row.version:<10} {state:<13} {row.python:<22} {row.note}".rstrip())
    typer.echo(f"\nenvironments: {settings.jax_versions_dir} (about 620 MB each)")
    typer.echo("install one: jaxplay versions add VERSION")


@versions_app.command()
def add(
    version: Annotated[
        list[str] | None, typer.Argument(help="Versions to install (e.g. 0.10.2 0.4.38).")
    ] = None,
    configured: Annotated[
        bool,
        typer.Option("--configured", help="Also those JAXPLAY_JAX_VERSIONS lists."),
    ] = False,
    timeout: Annotated[
        float, typer.Option("--timeout", min=1, help="Seconds one version's install may take.")
    ] = INSTALL_TIMEOUT_S,
) -> None:
    """Install JAX versions, each in its own environment with an interpreter it supports,
    exactly as its committed lock pins them (`jaxplay versions lock` makes one)."""
    from sandbox.environments.versions import (
        InstallError,
        default_version,
        grant_jail_access,
        install,
    )

    settings = _settings()
    wanted = list(dict.fromkeys([*(settings.jax_versions if configured else []), *(version or [])]))
    if not wanted:
        typer.echo("jaxplay: name the versions to add (jaxplay versions lists them)", err=True)
        raise typer.Exit(2)
    default = default_version()
    failed = 0
    for v in wanted:
        if v == default:
            typer.echo(f"jax {v}: the default version (jaxplay's own environment)")
            continue
        try:
            env = install(settings.jax_versions_dir, v, say=typer.echo, timeout_s=timeout)
        except InstallError as exc:
            typer.echo(f"jaxplay: {exc}", err=True)
            failed += 1
            continue
        for path in grant_jail_access(env, settings.sandbox.jail.jail_user):
            typer.echo(f"jax {v}: granted the jail's group search (x) on {path}")
    raise typer.Exit(1 if failed else 0)


@versions_app.command("lock")
def lock_versions(
    version: Annotated[list[str], typer.Argument(help="Versions to pin (e.g. 0.10.2).")],
    timeout: Annotated[
        float, typer.Option("--timeout", min=1, help="Seconds one version's resolution may take.")
    ] = INSTALL_TIMEOUT_S,
) -> None:
    """Resolve each version's packages for the interpreter it would use and write them,
    pinned by sha256, to sandbox/environments/version_locks/ for `add` (review and commit them)."""
    from sandbox.environments.versions import InstallError, lock

    failed = 0
    for v in version:
        try:
            lock(v, say=typer.echo, timeout_s=timeout)
        except (InstallError, OSError, ValueError, KeyError) as exc:
            typer.echo(f"jaxplay: {exc}", err=True)
            failed += 1
    raise typer.Exit(1 if failed else 0)


@versions_app.command()
def remove(
    version: Annotated[list[str], typer.Argument(help="Versions to delete.")],
) -> None:
    """Delete installed versions' environments (never the default's)."""
    from sandbox.environments.versions import remove as remove_version

    settings = _settings()
    missing = 0
    for v in version:
        if remove_version(settings.jax_versions_dir, v):
            typer.echo(f"jax {v}: removed")
        else:
            typer.echo(
                f"jaxplay: jax {v} has no environment in {settings.jax_versions_dir}", err=True
            )
            missing += 1
    raise typer.Exit(1 if missing else 0)


@versions_app.command("libraries")
def list_libraries(
    version: Annotated[
        list[str] | None, typer.Argument(help="Versions to show (default: every one).")
    ] = None,
) -> None:
    """The JAX libraries (Flax, Optax, Equinox...) each version offers, as its committed
    library lock pins them (sandbox/environments/libraries.py; scripts/lock_libraries.py makes them)."""
    from sandbox.environments import libraries, library_choices
    from sandbox.environments.versions import OFFERED, version_key

    for v in sorted(version or OFFERED, key=version_key):
        paths = libraries.locks_of(v)
        if not paths:
            typer.echo(f"jax {v}: no library lock (scripts/lock_libraries.py {v} makes one)")
            continue
        lock = libraries.read_lock(paths[0])
        offered = " ".join(f"{name}=={ver}" for name, ver in lock.offered().items())
        typer.echo(f"jax {v}: {offered}")
        for name, why in lock.not_offered.items():
            typer.echo(f"  not offered: {name}: {why}")
        for alt in library_choices.listed(v, paths[0].name.split("-py")[-1].split("-")[0]):
            state = "installed" if library_choices.is_installed(v, alt) else "not installed"
            typer.echo(f"  alternative: {alt.name}=={alt.version} ({state}; request libraries)")


def register(app: typer.Typer) -> None:
    app.add_typer(versions_app, name="versions")
