"""The one settings object: every setting declared once and documented, read from the
environment with flags on top, bad values refused by name, and `jaxplay settings`."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from typer.testing import CliRunner

from backend.app.core.settings import Settings
from backend.app.core.settings_table import declarations, setting_sources, show_value
from backend.cli.main import app
from backend.cli.serve import serve
from backend.cli.worker import worker
from sandbox.assembly.settings import SandboxSettings
from sandbox.jail.settings import MiB

ROOT = Path(__file__).resolve().parents[1]
runner = CliRunner()


@pytest.fixture(autouse=True)
def _no_jaxplay_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test sets what it reads: none of the machine's JAXPLAY_* settings."""
    import os

    for name in list(os.environ):
        if name.upper().startswith("JAXPLAY_"):
            monkeypatch.delenv(name)


def test_every_setting_is_declared_once_with_a_doc() -> None:
    infos = declarations()
    twice = [name for name, n in Counter(info.name for info in infos).items() if n > 1]
    assert twice == []
    assert len(infos) > 90  # the server's and the sandbox's, together
    for info in infos:
        assert info.doc.strip(), f"{info.variable} has no description"
        assert info.kind, info.variable


@pytest.mark.slow
def test_the_settings_doc_is_generated_from_the_declarations() -> None:
    done = subprocess.run(
        [sys.executable, "scripts/gen_settings_doc.py", "--check"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    doc = (ROOT / "docs" / "settings.md").read_text()
    for info in declarations():
        assert f"| `{info.variable}` |" in doc


def test_the_check_fails_on_a_stale_doc(tmp_path: Path) -> None:
    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        import gen_settings_doc
    finally:
        sys.path.remove(str(ROOT / "scripts"))
    text = (ROOT / "docs" / "settings.md").read_text()
    stale = text.replace("| `JAXPLAY_PORT` |", "| `JAXPLAY_PORTE` |")
    assert gen_settings_doc.generated(stale) == text
    assert stale != text


def test_values_come_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("JAXPLAY_PORT", "9001")
    monkeypatch.setenv("JAXPLAY_MEMORY_BYTES", "512M")
    monkeypatch.setenv("JAXPLAY_POOL_SPARES", "3")
    monkeypatch.setenv("JAXPLAY_UNSAFE_NO_JAIL", "yes")
    settings = Settings()
    assert settings.port == 9001
    assert settings.sandbox.limits.memory_bytes == 512 * MiB
    assert settings.sandbox.pool.pool_spares == 3
    assert settings.unsafe_no_jail is True
    sources = setting_sources({})
    assert sources["port"] == sources["memory_bytes"] == "environment"
    assert sources["host"] == sources["pids"] == "default"


def test_flags_override_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    from backend.cli.common import settings_from_flags

    monkeypatch.setenv("JAXPLAY_PORT", "9001")
    monkeypatch.setenv("JAXPLAY_PIDS", "64")
    flags = {"port": 9002, "pids": 32, "unsafe_no_jail": True, "host": None}
    settings = settings_from_flags("serve", flags)
    assert (settings.port, settings.sandbox.limits.pids, settings.unsafe_no_jail) == (
        9002,
        32,
        True,
    )
    sources = setting_sources(flags)
    assert sources["port"] == sources["pids"] == "flag"
    assert sources["host"] == "default"


def test_every_command_flag_is_a_declared_setting() -> None:
    """serve's and worker's flags name settings (``--queue`` is ``queue_url``...)."""
    import inspect

    names = {info.name for info in declarations()}
    from backend.cli.worker import FLAGS

    renamed = {flag.removeprefix("--").replace("-", "_"): name for name, flag in FLAGS.items()}
    renamed["worker_id"] = "worker_id"  # its flag is --id; the parameter keeps the name
    for command in (serve, worker):
        for flag in inspect.signature(command).parameters:
            if flag != "set_":  # --set NAME=VALUE: any setting
                assert renamed.get(flag, flag) in names, f"{command.__name__} --{flag}"


@pytest.mark.slow
def test_a_bad_value_is_refused_naming_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("JAXPLAY_PIDS", "many")
    result = runner.invoke(app, ["settings"])
    assert result.exit_code == 2
    assert "JAXPLAY_PIDS='many'" in result.output
    monkeypatch.delenv("JAXPLAY_PIDS")
    monkeypatch.setenv("JAXPLAY_PORT", "eighty")
    result = runner.invoke(app, ["serve"])
    assert result.exit_code == 2
    assert "jaxplay serve: bad settings: JAXPLAY_PORT='eighty'" in result.output
    monkeypatch.delenv("JAXPLAY_PORT")
    monkeypatch.setenv("JAXPLAY_UNSAFE_NO_JAIL", "perhaps")
    result = runner.invoke(app, ["settings"])
    assert result.exit_code == 2
    assert "JAXPLAY_UNSAFE_NO_JAIL='perhaps': not a boolean" in result.output
    with pytest.raises(ValueError, match="JAXPLAY_MEMORY_BYTES='lots'"):
        SandboxSettings.read({"JAXPLAY_MEMORY_BYTES": "lots"})


@pytest.mark.slow
def test_any_setting_is_a_flag_with_set(monkeypatch: pytest.MonkeyPatch) -> None:
    from backend.cli.common import settings_from_flags

    monkeypatch.setenv("JAXPLAY_PORT", "9001")
    settings = settings_from_flags(
        "serve",
        {"host": "0.0.0.0"},
        sets=["port=9003", "JAXPLAY_MEMORY_BYTES=1G", 'api_tokens=["t"]'],
    )
    assert (settings.host, settings.port, settings.api_tokens) == ("0.0.0.0", 9003, ["t"])
    assert settings.sandbox.limits.memory_bytes == 1024 * MiB
    # a command's own flag over its --set
    assert settings_from_flags("serve", {"port": 9004}, sets=["port=9003"]).port == 9004
    result = runner.invoke(app, ["serve", "--set", "max_queue=lots"])
    assert result.exit_code == 2
    assert "--set max_queue='lots'" in result.output
    result = runner.invoke(app, ["worker", "--set", "pids=many"])
    assert result.exit_code == 2
    assert "pids (flag)='many'" in result.output


def test_flag_help_is_the_declaration_s() -> None:
    result = runner.invoke(app, ["serve", "--help"], env={"COLUMNS": "400"})
    assert result.exit_code == 0
    assert "Port `jaxplay serve` listens on. (JAXPLAY_PORT; default 8000)" in result.output


def test_a_bad_flag_is_refused_naming_the_flag() -> None:
    result = runner.invoke(app, ["serve", "--log-level", "loud"])
    assert result.exit_code == 2
    assert "--log-level 'loud' (log_level)" in result.output
    result = runner.invoke(app, ["worker", "--queue", "redis://127.0.0.1:1/0", "--runs", "-1"])
    assert result.exit_code == 2
    assert "jaxplay worker: bad settings: --runs -1 (worker_runs)" in result.output


def test_jaxplay_settings_prints_every_setting_with_its_source(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("JAXPLAY_PORT", "9000")
    monkeypatch.setenv("JAXPLAY_DATABASE_URL", "postgresql://jaxplay:hunter2@db:5432/jaxplay")
    monkeypatch.setenv("JAXPLAY_API_TOKENS", '["a-secret-token"]')
    result = runner.invoke(app, ["settings", "--set", "pids=64", "--set", "JAXPLAY_POOL_SPARES=2"])
    assert result.exit_code == 0, result.output
    rows = {line.split()[0]: line.split()[1:] for line in result.output.splitlines()}
    assert set(rows) == {info.variable for info in declarations()}
    assert rows["JAXPLAY_PORT"] == ["environment", "9000"]
    assert rows["JAXPLAY_PIDS"] == ["flag", "64"]
    assert rows["JAXPLAY_POOL_SPARES"] == ["flag", "2"]
    assert rows["JAXPLAY_HOST"] == ["default", "127.0.0.1"]
    assert rows["JAXPLAY_MEMORY_BYTES"] == ["default", "2G"]
    assert rows["JAXPLAY_DATABASE_URL"] == [
        "environment",
        "postgresql://jaxplay:***@db:5432/jaxplay",
    ]
    assert rows["JAXPLAY_API_TOKENS"] == ["environment", "(hidden)"]
    assert "hunter2" not in result.output and "a-secret-token" not in result.output


def test_jaxplay_settings_json() -> None:
    result = runner.invoke(
        app, ["settings", "--json", "--set", 'cors_origins=["https://a.example"]']
    )
    assert result.exit_code == 0, result.output
    rows = [json.loads(line) for line in result.output.splitlines()]
    assert len(rows) == len(declarations())
    cors = next(r for r in rows if r["variable"] == "JAXPLAY_CORS_ORIGINS")
    assert cors == {
        "variable": "JAXPLAY_CORS_ORIGINS",
        "value": '["https://a.example"]',
        "source": "flag",
    }


def test_an_unknown_setting_is_refused() -> None:
    result = runner.invoke(app, ["settings", "--set", "nonsense=1"])
    assert result.exit_code == 2
    assert "not NAME=VALUE of a setting" in result.output


def test_values_are_shown_as_the_environment_takes_them() -> None:
    assert show_value("memory_bytes", 3 * 1024 * MiB) == "3G"
    assert show_value("output_bytes", 1000) == "1000"
    assert show_value("cache_enabled", False) == "false"
    assert show_value("allowed_hosts", ["a"]) == '["a"]'
    assert show_value("session_secret", None) == ""


#: the only modules of the program that may touch the process environment, and why
READS_ENVIRONMENT = {
    # the settings' readers, called once at start-up
    "backend/app/core/settings.py": "the program's settings",
    "backend/app/core/settings_table.py": "which settings the environment gave (setting_sources)",
    "sandbox/assembly/settings.py": "the sandbox's settings",
    "sandbox/jail/settings.py": "the jail's settings (the sandbox used on its own)",
    "sandbox/pool/settings.py": "the pool's settings (the sandbox used on its own)",
    # not settings: JAX's and XLA's own variables, inside a jail
    "sandbox/engine/core/compat.py": "XLA_FLAGS",
    "sandbox/engine/core/gpu_target.py": "JAX_SKIP_CUDA_CONSTRAINTS_CHECK",
    "sandbox/engine/core/tpu_topology.py": "libtpu's variables",
    "sandbox/zygote/main.py": "JAX_PLATFORMS, reported in the zygote's hello",
    "sandbox/zygote/seed.py": "JAX_PLATFORMS of the jails' environment: no seed for a device's",
    "sandbox/engine/outputs/export.py": "the jail's environment, passed on to the export's round trip",
    "sandbox/zygote/watch.py": "the environment as part of a process's state",
    # not read at all: the text of a bug report's repro script sets XLA_FLAGS for its devices
    "backend/app/outside/repro.py": "XLA_FLAGS, written into the repro it makes",
    # not settings: the unjailed worker's environment passed on without JAX's cache variables
    "sandbox/pool/subprocess_pool.py": "the environment a worker inherits, less JAX_COMPILATION_CACHE_*",
    # a forked jail's environment, set (not read) as bubblewrap's --clearenv/--setenv do
    "sandbox/jail/fork_server.py": "the jail template's environment, set from its arguments",
    "sandbox/jail/enter.py": "a forked jail's environment, set from its spec",
    # the command line's own: where the user's cache folder is (the XDG convention)
    "backend/cli/client/session_store.py": "XDG_CACHE_HOME, where jaxplay run keeps its session",
    # installing a JAX version: where an interpreter of each Python is (setup time)
    "sandbox/environments/versions.py": "JAXPLAY_PYTHON_3_x, PYENV_ROOT",
}


def test_nothing_below_start_up_reads_the_environment() -> None:
    """Settings are read once and passed down: no constructor calls ``from_env()`` or
    looks at ``os.environ`` (outside the modules above)."""
    offenders = []
    for path in sorted([*ROOT.glob("backend/**/*.py"), *ROOT.glob("sandbox/**/*.py")]):
        name = path.relative_to(ROOT).as_posix()
        if name in READS_ENVIRONMENT:
            continue
        text = path.read_text()
        if "from_env(" in text:
            offenders.append(f"{name}: from_env()")
        if any(word in text for word in ("os.environ", "getenv(", "environ.get(")):
            offenders.append(f"{name}: the environment")
    assert offenders == []


def test_the_server_passes_the_sandbox_its_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    from backend.app.relay.pools import pool_options

    monkeypatch.setenv("JAXPLAY_PIDS", "77")
    monkeypatch.setenv("JAXPLAY_POOL_SPARES", "5")
    monkeypatch.setenv("JAXPLAY_JAIL_USER", "someone")
    settings = Settings(unsafe_no_jail=True)
    for kind in ("auto", "zygote"):
        options = pool_options(settings, kind)
        assert options.limits.pids == 77 and options.pool.pool_spares == 5
        assert options.jail.jail_user == "someone"
    assert pool_options(settings, "auto").unsafe_no_jail is True
