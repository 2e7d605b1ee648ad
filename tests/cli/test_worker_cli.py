"""``jaxplay worker``'s set-up: settings, devices for GPU/TPU jails (on a fake /dev:
no accelerator exists here), and the CPU twin, which takes the same path for real."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from backend.app.core.settings import Settings
from backend.app.relay.pools import PoolConfigError, pool_spec
from sandbox.queue.devices import DeviceError, DeviceSetup, device_setup
from tests.gates import needs_jail

ROOT = Path(__file__).resolve().parents[2]


def fake_dev(tmp_path: Path, *names: str) -> Path:
    dev = tmp_path / "dev"
    for name in names:
        (dev / name).parent.mkdir(parents=True, exist_ok=True)
        (dev / name).touch()
    return dev


def test_a_gpu_worker_binds_its_gpus_and_the_control_nodes(tmp_path: Path) -> None:
    dev = fake_dev(tmp_path, "nvidia0", "nvidia1", "nvidia10", "nvidiactl", "nvidia-uvm", "null")
    setup = device_setup("gpu", dev=dev)
    assert setup.devices == tuple(
        str(dev / n) for n in ("nvidia0", "nvidia1", "nvidia10", "nvidiactl", "nvidia-uvm")
    )
    assert setup.env["JAX_PLATFORMS"] == "cuda"
    assert setup.env["XLA_PYTHON_CLIENT_PREALLOCATE"] == "false"
    assert setup.env["CUDA_VISIBLE_DEVICES"] == "0,1,2"
    assert setup.runs == 1  # one run at a time per GPU worker
    one = device_setup("gpu", dev=dev, visible="1")
    assert one.devices[0] == str(dev / "nvidia1") and str(dev / "nvidia0") not in one.devices
    assert one.env["CUDA_VISIBLE_DEVICES"] == "0"  # what the jail sees is renumbered


def test_a_gpu_worker_without_gpus_says_what_is_missing(tmp_path: Path) -> None:
    with pytest.raises(DeviceError, match="no NVIDIA GPU device nodes"):
        device_setup("gpu", dev=fake_dev(tmp_path, "null"))
    with pytest.raises(DeviceError, match="nvidiactl is missing"):
        device_setup("gpu", dev=fake_dev(tmp_path, "nvidia0"))
    with pytest.raises(DeviceError, match="driver path"):
        device_setup("cpu", ro_paths=(str(tmp_path / "nope"),))


def test_a_tpu_worker_binds_accel_or_vfio_nodes(tmp_path: Path) -> None:
    accel = device_setup("tpu", dev=fake_dev(tmp_path / "a", "accel0", "accel1"))
    assert [Path(d).name for d in accel.devices] == ["accel0", "accel1"]
    assert accel.env["JAX_PLATFORMS"] == "tpu"
    vfio = device_setup("tpu", dev=fake_dev(tmp_path / "v", "vfio/vfio", "vfio/0", "vfio/1"))
    assert [Path(d).name for d in vfio.devices] == ["vfio", "0", "1"]
    with pytest.raises(DeviceError, match="no TPU device nodes"):
        device_setup("tpu", dev=fake_dev(tmp_path / "n", "null"))


def test_the_cpu_twin_binds_nothing_and_pins_the_platform(tmp_path: Path) -> None:
    extra = tmp_path / "driver"
    extra.mkdir()
    assert device_setup("cpu", ro_paths=(str(extra),)) == DeviceSetup(
        "cpu", env={"JAX_PLATFORMS": "cpu"}, ro_paths=(str(extra),)
    )


@needs_jail
def test_the_cpu_twin_runs_through_the_device_jail() -> None:
    """The path a GPU worker takes (DeviceJailer: environment, driver paths), with the
    CPU's setup, for real: the jailed warm pool starts and runs."""
    import asyncio

    from sandbox.protocol import RunRequest
    from sandbox.queue.devices import device_pool

    async def go() -> list[dict[str, object]]:
        extra = "/etc/hostname" if Path("/etc/hostname").exists() else "/etc/passwd"
        setup = DeviceSetup("cpu", env={"JAX_PLATFORMS": "cpu", "JAXPLAY_TWIN": "1"},
                            ro_paths=(extra,))  # fmt: skip
        pool = device_pool(setup)
        await pool.start()
        try:
            code = (
                "import os\n"
                f"print((os.environ.get('JAXPLAY_TWIN'), os.path.exists({extra!r})))\n"
                "def f():\n    return 0\n"
            )
            request = RunRequest.model_validate({"code": code, "outputs": ["jaxpr"]})
            handle = await pool.submit(request, "twin")
            return [e async for e in handle.events()]
        finally:
            await pool.close()

    events = asyncio.run(go())
    assert events[-1]["status"] == "ok", events[-1]
    printed = "".join(str(e.get("text", "")) for e in events if e["type"] == "stdout")
    assert "('1', True)" in printed
    assert events[0]["worker"]["platform"] == "cpu"  # type: ignore[index]


def test_worker_settings_and_the_server_pool_choice(tmp_path: Path) -> None:
    s = Settings(queue_url="redis://localhost:6379/0", database_url="sqlite:///:memory:")
    assert pool_spec(s)[0] == "redis"
    with pytest.raises(PoolConfigError, match="both set"):
        pool_spec(Settings(queue_url="redis://x:6379", pool="subprocess"))
    with pytest.raises(PoolConfigError, match="needs queue_url"):
        pool_spec(Settings(pool="redis"))
    with pytest.raises(ValueError, match="queue_url"):
        Settings(queue_url="http://x")
    with pytest.raises(ValueError, match="twice"):
        Settings(worker_heartbeat_s=5, worker_dead_after_s=6)


def _worker(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "backend.cli.worker", *args],
        cwd=ROOT,
        env={**os.environ, "JAXPLAY_LOG_FORMAT": "text", **env},
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.slow
def test_the_worker_command_refuses_clearly() -> None:
    no_queue = _worker()
    assert no_queue.returncode == 2 and "give --queue" in no_queue.stderr
    bad = _worker("--queue", "redis://127.0.0.1:1/0", "--backend", "quantum")
    assert bad.returncode == 2 and "worker_backend" in bad.stderr
    if not Path("/dev/nvidiactl").exists():
        gpu = _worker("--queue", "redis://127.0.0.1:1/0", "--backend", "gpu")
        assert gpu.returncode == 2 and "no NVIDIA GPU device nodes" in gpu.stderr


@pytest.mark.slow
def test_jaxplay_lists_the_worker_command() -> None:
    result = subprocess.run(
        [sys.executable, "-c", "from backend.cli.main import main; main()", "worker", "--help"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0 and "--queue" in result.stdout, result.stderr
