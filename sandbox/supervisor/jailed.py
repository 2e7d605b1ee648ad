"""One run in one fresh jail: ``python -m sandbox.engine`` under bubblewrap, supervised.

No warm zygote: each run pays for starting Python and importing JAX (about a
second). The warm pool (sandbox/pool/zygote_pool.py) is what serves users; this is
the simple jailed path, and what the pool's jail is checked against.
"""

from __future__ import annotations

import asyncio

from sandbox.jail.bwrap import jail_returncode
from sandbox.jail.jail import Jail, Jailer
from sandbox.protocol.events import DoneStatus
from sandbox.protocol.requests import RunRequest
from sandbox.supervisor.relay import MAX_EVENT_BYTES, OutputLimits, SupervisedRun, human_bytes


class JailedRun(SupervisedRun):
    def __init__(
        self,
        jailer: Jailer,
        request: RunRequest,
        run_id: str,
        *,
        limits: OutputLimits | None = None,
    ) -> None:
        jl = jailer.limits
        super().__init__(
            jailer.python("-m", "sandbox.engine"),
            request,
            run_id,
            wall_s=min(request.timeout_s, jl.max_wall_s),
            limits=limits or OutputLimits(output_bytes=jl.output_bytes, event_bytes=jl.event_bytes),
        )
        self._jailer = jailer
        self._jail: Jail = jailer.jail()

    async def _spawn(self) -> asyncio.subprocess.Process:
        return await self._jail.start(self._argv, limit=MAX_EVENT_BYTES)

    async def _wait(self) -> int | None:
        assert self._proc is not None
        returncode = await self._proc.wait()
        self._jail.kill()  # whatever it left behind
        await self._jail.wait_gone()
        return jail_returncode(returncode)

    def _kill(self) -> None:
        self._jail.kill()

    def _limit_hit(self) -> tuple[DoneStatus, str] | None:
        if self._jail.oom_killed():
            return ("killed", f"memory {human_bytes(self._jailer.limits.memory_bytes)}")
        return None

    async def _finish(self) -> None:
        await super()._finish()
        await self._jail.close()
