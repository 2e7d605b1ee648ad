"""The database's disk filling up under a server (issue 52): a share that no longer fits
is told so (503 ``storage_full``, with a ``Retry-After``), runs keep going, nothing
stored before is lost, changed or corrupted, and sharing works again once there is
room.

The disk is a real small file system: a tmpfs mounted in a mount namespace of the
server's own (``unshare``; a user namespace too where the test is not root), so the
full disk is the kernel's own ``ENOSPC``, not a database setting that imitates it. The
test fills it through ``/proc/PID/root`` and frees it the same way.
"""

from __future__ import annotations

import errno
import os
import shutil
import signal
import sqlite3
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.gates import jail_required
from tests.support.live_server import MODULE, LiveServer
from tests.support.ports import free_port
from tests.support.services import Postgres, _pg_bin

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]  # the PostgreSQL case: marked below


def _namespaces_missing() -> str | None:
    """Why a private tmpfs cannot be mounted here (None: it can)."""
    if shutil.which("unshare") is None:
        return "unshare is missing (util-linux)"
    user = [] if os.geteuid() == 0 else ["--user", "--map-root-user"]  # as the fixture does
    probe = subprocess.run(
        ["unshare", *user, "--mount", "sh", "-c", 'mount -t tmpfs -o size=64k probe "$0"', "/tmp"],
        capture_output=True, text=True,
    )  # fmt: skip
    if probe.returncode != 0:
        return f"a tmpfs cannot be mounted in a mount namespace here: {probe.stderr.strip()}"
    return None


def _skip_without_namespaces() -> None:
    why = _namespaces_missing()
    if why is None:
        return
    if jail_required():  # the jail needs the same user namespaces: demanded, a failure
        pytest.fail(why)
    pytest.skip(why)


def fill(directory: Path) -> Path:
    """Write a file in ``directory`` until its file system is full; the file."""
    filler = directory / f"filler-{uuid.uuid4().hex[:6]}"
    chunk = b"\0" * 65536
    with open(filler, "wb", buffering=0) as out:
        try:
            while True:
                out.write(chunk)
        except OSError as exc:
            assert exc.errno == errno.ENOSPC, exc
    return filler


def _snippet(i: int, pad: int = 6000) -> dict[str, Any]:
    # distinct, and large enough that a few of them need new pages
    return {"code": f"def f(x):\n    return x * {i}\n# {'p' * pad}\n", "args": "(2.0,)"}


@pytest.fixture
def sqlite_server(tmp_path: Path) -> Iterator[tuple[LiveServer, Path]]:
    """A server (the fake pool) whose SQLite file is on a 4 MiB file system of its own;
    with the directory as the test sees the server's."""
    _skip_without_namespaces()
    disk = tmp_path / "disk"
    disk.mkdir()
    env = {"JAXPLAY_SNIPPET_RATE_PER_MINUTE": "0", "JAXPLAY_RATE_LIMIT_PER_MINUTE": "0"}
    server = LiveServer(
        disk / "jaxplay.sqlite3",
        "--pool", "tests.server.fakes:FakePool", "--unsafe-no-jail",
        env=env, log=tmp_path / "server.log",
    )  # fmt: skip
    mount = 'mount -t tmpfs -o size=4m jaxplay-disk "$0" && exec "$@"'
    user = [] if os.geteuid() == 0 else ["--user", "--map-root-user"]
    server.command = ["unshare", *user, "--mount", "sh", "-c", mount, str(disk), *MODULE]
    server.start()
    try:
        yield server, Path(f"/proc/{server.pid}/root") / disk.relative_to("/")
    finally:
        server.stop()


@pytest.fixture
def postgres_server(tmp_path: Path) -> Iterator[tuple[LiveServer, Path]]:
    """A server (the fake pool) on a PostgreSQL cluster whose data directory is on a
    96 MiB file system of its own. PostgreSQL refuses to run as root and a user
    namespace would make it root there, so this one needs the machine's root: the
    cluster runs as ``postgres`` in a mount namespace made by root."""
    if os.geteuid() != 0 or Postgres.missing() or shutil.which("unshare") is None:
        pytest.skip("PostgreSQL on a small file system of its own needs root and PostgreSQL")
    # not under tmp_path: the postgres user must reach it (pytest's are root's only)
    disk, port = Path(tempfile.mkdtemp(prefix="jaxplay-pg-disk-")), free_port()
    disk.chmod(0o755)
    tools = Path(str(_pg_bin("pg_ctl"))).parent
    script = f"""set -e
mount -t tmpfs -o size=96m,mode=755 jaxplay-pg-disk "{disk}"
chown postgres "{disk}"
runuser -u postgres -- {tools}/initdb -D "{disk}/data" -U postgres --auth=trust -E UTF8 \
    --no-sync --no-instructions >/dev/null
runuser -u postgres -- {tools}/pg_ctl -D "{disk}/data" -l "{disk}/pg.log" -w start \
    -o "-p {port} -k {disk} -c listen_addresses=127.0.0.1" >/dev/null
"""
    made = subprocess.run(
        ["unshare", "--mount", "--propagation", "private", "sh", "-c", script],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert made.returncode == 0, made.stderr
    url = f"postgresql://postgres@127.0.0.1:{port}/postgres"
    import psycopg

    with psycopg.connect(url) as conn:  # the postmaster: its backend's parent
        backend = conn.execute("SELECT pg_backend_pid()").fetchone()[0]  # type: ignore[index]
        # read while the connection holds the backend: it exits once the connection closes
        postmaster = int(Path(f"/proc/{backend}/stat").read_text().rsplit(")", 1)[1].split()[1])
    env = {"JAXPLAY_SNIPPET_RATE_PER_MINUTE": "0", "JAXPLAY_RATE_LIMIT_PER_MINUTE": "0"}
    server = LiveServer(
        url, "--pool", "tests.server.fakes:FakePool", "--unsafe-no-jail",
        env=env, log=tmp_path / "server.log",
    )  # fmt: skip
    try:
        server.start()
        yield server, Path(f"/proc/{postmaster}/root") / disk.relative_to("/")
    finally:
        server.stop()
        os.kill(postmaster, signal.SIGQUIT)  # an immediate shutdown; the namespace goes with it
        shutil.rmtree(disk, ignore_errors=True)


def test_a_full_disk_under_sqlite(sqlite_server: tuple[LiveServer, Path]) -> None:
    server, disk = sqlite_server
    a_full_disk(server, disk)
    with sqlite3.connect(disk / "jaxplay.sqlite3") as db:
        assert db.execute("PRAGMA integrity_check").fetchall() == [("ok",)]


@pytest.mark.postgres
def test_a_full_disk_under_postgresql(postgres_server: tuple[LiveServer, Path]) -> None:
    a_full_disk(*postgres_server)


def a_full_disk(server: LiveServer, disk: Path) -> None:
    http = httpx.Client(base_url=server.url, timeout=30)
    made: dict[str, dict[str, Any]] = {}
    for i in range(5):
        r = http.post("/api/v1/snippets", json=_snippet(i))
        assert r.status_code == 201, r.text
        made[r.json()["id"]] = http.get(f"/api/v1/snippets/{r.json()['id']}").json()

    filler = fill(disk)
    refused = None
    for i in range(5, 400):  # what still fits in the database's free pages goes in
        r = http.post("/api/v1/snippets", json=_snippet(i))
        if r.status_code != 201:
            refused = r
            break
        made[r.json()["id"]] = http.get(f"/api/v1/snippets/{r.json()['id']}").json()
    assert refused is not None, "the disk never filled up"
    assert refused.status_code == 503, refused.text
    assert refused.json()["error"] == "storage_full"
    assert "out of disk space" in refused.json()["message"]
    assert refused.headers["retry-after"] == "60"
    # Runs keep going (their cache and figures are not written; nothing is served from them).
    ran = http.post("/api/v1/runs", json={"code": "def f(x):\n    return x\n", "args": "(1.0,)"})
    assert ran.status_code == 200 and ran.json()["events"][-1]["status"] == "ok", ran.text
    # What was stored before reads back as it was.
    for snippet_id, stored in made.items():
        assert http.get(f"/api/v1/snippets/{snippet_id}").json() == stored
    assert http.get("/healthz").status_code == 200

    filler.unlink()
    again = http.post("/api/v1/snippets", json=_snippet(1000))
    assert again.status_code == 201, again.text
    for snippet_id, stored in made.items():
        assert http.get(f"/api/v1/snippets/{snippet_id}").json() == stored
