"""``jaxplay run --server`` is a thin client: what it imports is most of its wall time
on a kept session (docs/benchmarks.md, "The CLI without the server's modules"). So the
console script's ``run`` builds no protocol model, reads no server setting and starts no
event loop; the server checks the request. A change that pulls one of them back in
fails here, in a fresh interpreter as the console script is."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

#: what the server's side of the house costs to import, and the client does not need
NOT_ON_THE_CLIENT = [
    "backend.app.core.settings",
    "pydantic_settings",
    "sandbox.protocol.events",
    "sandbox.protocol.requests",
    "httpx",
    "asyncio",
    "fastapi",
]

PROBE = """
import json, sys
NOT_ON_THE_CLIENT = sys.argv[2:]
sys.argv = ["jaxplay", "run", sys.argv[1], "--args", "1.0", "--server", "http://127.0.0.1:9"]
from backend.cli.main import main
try:
    main()
except SystemExit as exc:
    code = exc.code
print(json.dumps({"code": code, "loaded": [m for m in NOT_ON_THE_CLIENT if m in sys.modules]}))
"""


def test_run_with_a_server_imports_none_of_the_servers_modules(tmp_path: Path) -> None:
    code = tmp_path / "f.py"
    code.write_text("def f(x):\n    return x\n")
    proc = subprocess.run(
        [sys.executable, "-c", PROBE, str(code), *NOT_ON_THE_CLIENT],
        capture_output=True,
        text=True,
        timeout=60,
    )
    found = json.loads(proc.stdout.strip().splitlines()[-1])
    assert found["code"] == 1 and "cannot reach" in proc.stderr, proc.stderr  # nothing listens
    assert found["loaded"] == [], found


def test_the_other_commands_still_see_every_command() -> None:
    import typer

    from backend.cli.main import app

    group = typer.main.get_command(app)
    names = set(group.commands)  # type: ignore[attr-defined]
    assert names == {"run", "serve", "worker", "mcp", "settings", "versions"}, names
