"""The stack that `make deploy-check` started (scripts/deploy_check.sh): its address,
its compose command and its passwords come in the environment. Without them (a plain
`make test`) these tests skip: they need the images built and running."""

from __future__ import annotations

import os
import shlex
import subprocess
from dataclasses import dataclass

import pytest


@dataclass(frozen=True)
class Stack:
    url: str  # the load balancer
    compose: list[str]  # the compose command, project and files included
    redis_port: int
    cgroups: str  # where the cgroup hierarchies are mounted (docker/delegate-cgroups.sh)

    def redis_url(self, user: str) -> str:
        password = os.environ[f"REDIS_{user.upper()}_PASSWORD"]
        return f"redis://{user}:{password}@127.0.0.1:{self.redis_port}/0"

    def compose_run(self, *args: str, timeout: float = 120) -> str:
        done = subprocess.run(
            [*self.compose, *args], capture_output=True, text=True, timeout=timeout, check=False
        )
        assert done.returncode == 0, f"{' '.join(args)}: {done.stderr[-2000:]}"
        return done.stdout


@pytest.fixture(scope="session")
def stack() -> Stack:
    url = os.environ.get("JAXPLAY_DEPLOY_URL")
    if not url:
        pytest.skip("the compose stack is not running: `make deploy-check` runs these tests")
    return Stack(
        url=url,
        compose=shlex.split(os.environ["JAXPLAY_DEPLOY_COMPOSE"]),
        redis_port=int(os.environ.get("JAXPLAY_DEPLOY_REDIS_PORT", "6379")),
        cgroups=os.environ["JAXPLAY_DEPLOY_CGROUPS"],
    )
