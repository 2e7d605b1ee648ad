"""What a worker's jails need of the machine's accelerators, and a jailed pool with it.

``device_setup(backend)`` finds, for ``gpu`` and ``tpu``, the device nodes to bind
into every jail, the driver files outside ``/usr`` to bind read-only (``/usr``
itself, where Debian and the NVIDIA container toolkit put ``libcuda``, is always
bound; JAX's own CUDA and TPU libraries come from pip, in the bound virtual
environment), and the environment JAX needs. For ``cpu`` it is empty but for
``JAX_PLATFORMS=cpu``, and takes the same path: that is the twin the tests run.

GPU notes (docs/deploy.md): one run at a time per GPU (memory is not limited by
cgroups; F6 of the sandbox notes), so run one worker per GPU and pick it with
``visible`` (``JAXPLAY_WORKER_DEVICES=0``). ``XLA_PYTHON_CLIENT_PREALLOCATE=false``
is a courtesy, not a control: user code may change it before importing JAX.
"""

from __future__ import annotations

import dataclasses
import inspect
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from sandbox.jail.settings import JailConfig, JailLimits
    from sandbox.pool.base import Pool
    from sandbox.pool.settings import PoolSettings

#: NVIDIA's control nodes; each one present is bound (``nvidia-uvm`` is needed for
#: CUDA's unified memory, the others by some driver versions).
NVIDIA_CONTROL = ("nvidiactl", "nvidia-uvm", "nvidia-uvm-tools", "nvidia-modeset")


class DeviceError(RuntimeError):
    """This machine lacks what the backend needs; the message says what."""


@dataclass(frozen=True)
class DeviceSetup:
    backend: str
    #: device nodes bound into every jail (as devices, read-write)
    devices: tuple[str, ...] = ()
    #: driver files or directories outside /usr, bound read-only
    ro_paths: tuple[str, ...] = ()
    #: set in every jail, over the jail's own minimal environment
    env: dict[str, str] = field(default_factory=dict)
    #: runs at once this machine should take (0: the local pool's own sizing)
    runs: int = 0


def _numbered(dev: Path, pattern: str) -> list[Path]:
    found = [p for p in dev.glob("*") if re.fullmatch(pattern, p.name)]
    return sorted(found, key=lambda p: int(re.sub(r"\D", "", p.name) or 0))


def _pick(nodes: list[Path], visible: str | None) -> list[Path]:
    if not visible:
        return nodes
    wanted = {v.strip() for v in visible.split(",") if v.strip()}
    return [n for n in nodes if re.sub(r"\D", "", n.name) in wanted]


def device_setup(
    backend: str,
    *,
    dev: str | Path = "/dev",
    visible: str | None = None,
    ro_paths: tuple[str, ...] = (),
) -> DeviceSetup:
    """The setup for ``backend`` on this machine; DeviceError when it has none."""
    dev = Path(dev)
    extra = tuple(p for p in ro_paths if p)
    for path in extra:
        if not Path(path).exists():
            raise DeviceError(f"driver path {path} does not exist")
    if backend == "cpu":
        return DeviceSetup("cpu", env={"JAX_PLATFORMS": "cpu"}, ro_paths=extra)
    if backend == "gpu":
        gpus = _pick(_numbered(dev, r"nvidia\d+"), visible)
        if not gpus:
            raise DeviceError(
                f"no NVIDIA GPU device nodes ({dev}/nvidia0, ...) "
                + (f"among {visible!r} " if visible else "")
                + "on this machine: is the driver loaded, and in a container, were the "
                "GPUs passed in (docker run --gpus ...)?"
            )
        control = [dev / n for n in NVIDIA_CONTROL if (dev / n).exists()]
        if dev / "nvidiactl" not in control:
            raise DeviceError(f"{dev}/nvidiactl is missing: the NVIDIA driver is not loaded")
        env = {
            "JAX_PLATFORMS": "cuda",
            "XLA_PYTHON_CLIENT_PREALLOCATE": "false",
            # the jail's own numbering: what was bound is all it sees
            "CUDA_VISIBLE_DEVICES": ",".join(str(i) for i in range(len(gpus))),
        }
        return DeviceSetup("gpu", tuple(map(str, gpus + control)), extra, env, runs=1)
    if backend == "tpu":
        # TPU v4/v5e expose /dev/accelN; v5p/v6e go through VFIO.
        nodes = _pick(_numbered(dev, r"accel\d+"), visible)
        vfio = dev / "vfio"
        if not nodes and vfio.is_dir():
            nodes = [vfio / "vfio", *_pick(_numbered(vfio, r"\d+"), visible)]
        if not nodes:
            raise DeviceError(
                f"no TPU device nodes ({dev}/accel0, ... or {dev}/vfio/...) on this machine"
            )
        env = {"JAX_PLATFORMS": "tpu", "TPU_SKIP_MDS_QUERY": "1"}
        return DeviceSetup("tpu", tuple(map(str, nodes)), extra, env, runs=1)
    raise DeviceError(f"unknown backend {backend!r}: cpu, gpu or tpu")


def jail_supports_devices() -> bool:
    """Whether this build's jail can bind device nodes (``bwrap_argv(devices=...)``)."""
    from sandbox.jail import bwrap

    return "devices" in inspect.signature(bwrap.bwrap_argv).parameters


def device_pool(
    setup: DeviceSetup,
    *,
    limits: JailLimits | None = None,
    jail: JailConfig | None = None,
    pool: PoolSettings | None = None,
) -> Pool:
    """The jailed warm pool, its jails set up for the backend: device nodes, driver
    paths, environment (the registry's ``zygote`` and ``auto`` with a ``device``).
    ``JailUnavailable`` without a usable jail, or one that cannot bind the devices."""
    from sandbox.jail.jail import Jailer, JailUnavailable
    from sandbox.pool.settings import PoolSettings
    from sandbox.pool.zygote_pool import ZygotePool

    class DeviceJailer(Jailer):
        def __init__(self) -> None:
            super().__init__(limits, jail)
            if setup.ro_paths:
                paths = tuple(dict.fromkeys((*self.runtime.ro_paths, *setup.ro_paths)))
                self.runtime = dataclasses.replace(self.runtime, ro_paths=paths)
            self.devices = setup.devices
            self.env = dict(setup.env)

    settings = pool or PoolSettings()
    if setup.runs and not settings.pool_running:
        settings = dataclasses.replace(
            settings, pool_running=setup.runs, pool_size=settings.pool_size or setup.runs + 1
        )
    if setup.devices and not jail_supports_devices():
        raise JailUnavailable(
            f"this build's jail cannot bind device nodes yet ({', '.join(setup.devices)}); "
            f"a {setup.backend} worker needs it"
        )
    return ZygotePool(DeviceJailer(), settings)
