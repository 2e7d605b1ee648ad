"""The edit-and-run loop: jaxplay against plain JAX in a warm notebook, against its own
engine in one process, and against a fresh process, in one run.

Each case is run as a person editing a cell would: the same shapes, new code text each
time (a changed constant). Four ways, side by side:

- plain JAX (the headline's floor, ``benchmarks/support/plain_jax.py``): what a notebook user
  types to see what the request asks for, in ONE warm process with the machine's CPUs
  and no jaxplay code: the cell re-run (``exec`` of the edited code, the args), then
  ``jax.make_jaxpr(g)(*args)``, ``jax.jit(g).lower(*args).as_text()``,
  ``.compile().as_text()`` and its ``cost_analysis()``, and the call
  ``jax.block_until_ready(g(*args))``, where ``g`` is ``f`` under the request's
  transforms (``jax.grad``, ``jax.jit``...). JAX's caches are kept, as a kernel keeps
  them: the edit re-traces and re-compiles ``f``, eager operations on the same shapes
  are cached;
- engine: jaxplay's own engine (``run_message``: every output, with source maps, the
  cost before optimisation, the events) in ONE warm process, pinned to one CPU like a
  jail: what jaxplay costs over its engine;
- jaxplay: ``POST /api/v1/runs`` (NDJSON) against a real ``jaxplay serve`` with the
  jailed warm pool (``--pool zygote``), one client (token) per case, ``--pause``
  seconds between its runs (every floor idles as long before each of its runs); its
  first run is a new client's first run;
- fresh: a new ``python -m sandbox.engine`` per run (``SubprocessPool``, no jail).

Outputs: jaxpr, stablehlo, hlo, value, cost. Prints medians per case, the ratios
jaxplay/plain JAX (the headline), jaxplay/engine and fresh/jaxplay, the first ``jaxpr`` event after the request, and a
new client's first run against its later ones, stage by stage (a new client's first
run starts once the pool has a ready spare jail, so it never measures a jail's start),
and against the warm kernel's first run of the same cell (which, like a new client's,
compiles the cell's eager operations for its shapes).

    .venv/bin/python benchmarks/engine/edit_loop.py [--repeat 6] [--fresh-repeat 2] [--pause 0.5]
    .venv/bin/python benchmarks/engine/edit_loop.py --quick   # two cases, one edit: does it work
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from benchmarks.support import plain_jax  # noqa: E402  (the first floor: plain JAX)
from benchmarks.support.stats import percentile  # noqa: E402

OUTPUTS = ["jaxpr", "stablehlo", "hlo", "value", "cost"]

# {c}: the edit (a constant that changes every run); the shapes never change.
CASES: dict[str, dict[str, Any]] = {
    # the libraries' own (issue 22): imported before the fork in jaxplay's zygotes, and
    # once by the warm kernel, as a notebook user imports them once
    "flax nnx grad": {
        "code": (
            "import jax.numpy as jnp\nfrom flax import nnx\n\n"
            "graphdef, params = nnx.split(nnx.Linear(16, 4, rngs=nnx.Rngs(0)))\n\n"
            "def f(params, x):\n"
            "    model = nnx.merge(graphdef, params)\n"
            "    return jnp.sum(jnp.tanh(model(x) * {c}) ** 2)\n"
        ),
        "args": "(params, jnp.ones((8, 16)))",
        "transforms": [{"name": "grad"}],
    },
    "optax adam jit": {
        "code": (
            "import jax.numpy as jnp\nimport optax\n\n"
            "opt = optax.adam(1e-3 * {c})\n\n"
            "def f(params, grads):\n"
            "    updates, _ = opt.update(grads, opt.init(params), params)\n"
            "    return optax.apply_updates(params, updates)\n"
        ),
        "args": "(jnp.ones(8), jnp.ones(8))",
        "transforms": [{"name": "jit"}],
    },
    "tanh-matmul grad": {
        "code": "import jax.numpy as jnp\n\ndef f(w, x):\n    return jnp.sum(jnp.tanh(x @ w * {c}) ** 2)\n",
        "args": "(jnp.ones((16, 4)), jnp.ones((8, 16)))",
        "transforms": [{"name": "grad"}],
    },
    "per-example grads": {
        "code": (
            "import jax\nimport jax.numpy as jnp\n\n"
            "def loss(w, x):\n    return jnp.sum(jnp.tanh(x @ w * {c}) ** 2)\n\n"
            "def f(w, xs):\n    return jax.vmap(jax.grad(loss), in_axes=(None, 0))(w, xs)\n"
        ),
        "args": "(jnp.ones((16, 4)), jnp.ones((8, 16)))",
        "transforms": [],
    },
    "hessian exp*cos": {
        "code": "import jax.numpy as jnp\n\ndef f(x):\n    return jnp.sum(jnp.exp(x) * jnp.cos(x * {c}))\n",
        "args": "(jnp.linspace(0.0, 1.0, 6),)",
        "transforms": [{"name": "hessian"}],
    },
    "scan grad+jit": {
        "code": (
            "import jax\nimport jax.numpy as jnp\n\n"
            "def f(x):\n"
            "    def step(c, _):\n        return jnp.sin(c) * {c}, None\n"
            "    out, _ = jax.lax.scan(step, x, None, length=8)\n"
            "    return jnp.sum(out)\n"
        ),
        "args": "(jnp.ones(4),)",
        "transforms": [{"name": "grad"}, {"name": "jit"}],
    },
    "jacrev": {
        "code": "import jax.numpy as jnp\n\ndef f(x):\n    return jnp.sin(x * {c}) * jnp.cos(x[::-1])\n",
        "args": "(jnp.arange(4.0),)",
        "transforms": [{"name": "jacrev"}],
    },
    "pytree params grad": {
        "code": (
            "import jax.numpy as jnp\n\n"
            "def f(params, x):\n"
            "    h = jnp.tanh(x @ params['w1'] + params['b1'])\n"
            "    return jnp.sum((h @ params['w2'] + params['b2']) ** 2) * {c}\n"
        ),
        "args": (
            "({'w1': jnp.ones((8, 16)), 'b1': jnp.zeros(16), 'w2': jnp.ones((16, 2)),"
            " 'b2': jnp.zeros(2)}, jnp.ones((4, 8)))"
        ),
        "transforms": [{"name": "grad"}],
    },
    "random keys": {
        "code": (
            "import jax\nimport jax.numpy as jnp\n\n"
            "def f(key, x):\n"
            "    noise = jax.random.normal(key, x.shape)\n"
            "    return jnp.sum((x + {c} * noise) ** 2)\n"
        ),
        "args": "(jax.random.key(0), jax.random.uniform(jax.random.key(1), (8,)))",
        "transforms": [{"name": "grad", "argnums": 1}],
    },
    "python loop": {
        "code": (
            "import jax.numpy as jnp\n\n"
            "def f(x):\n"
            "    for i in range(6):\n        x = jnp.sin(x) * {c} + i\n"
            "    return jnp.sum(x)\n"
        ),
        "args": "(jnp.ones(5),)",
        "transforms": [{"name": "grad"}],
    },
}


def request(case: str, edit: int) -> dict[str, Any]:
    spec = CASES[case]
    return {
        "code": spec["code"].replace("{c}", f"{1.0 + edit / 1000:.3f}") + f"# edit {edit}\n",
        "args": spec["args"],
        "transforms": spec["transforms"],
        "outputs": OUTPUTS,
        "cache": False,
        "timeout_s": 120,
    }


# --- jaxplay's engine in one warm process (a child, so this one never imports JAX) -------


def notebook_main(repeat: int, pause_s: float) -> None:
    os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})
    from sandbox.engine import worker
    from sandbox.protocol import RunRequest

    results: dict[str, list[float]] = {c: [] for c in CASES}
    in_stages: dict[str, list[float]] = {c: [] for c in CASES}
    firsts: dict[str, float] = {}
    for edit in range(repeat + 1):
        for case in CASES:
            body = {k: v for k, v in request(case, edit).items() if k != "cache"}
            message = {
                "protocol": 1,
                "run_id": "notebook",
                "request": RunRequest(**body).model_dump(),
            }
            time.sleep(pause_s)
            with tempfile.TemporaryFile() as sink:
                started = time.perf_counter()
                worker.run_message(message, sink.fileno())
                took = (time.perf_counter() - started) * 1000
                sink.seek(0)
                events = [json.loads(line) for line in sink.read().splitlines()]
            if edit:  # the first round is the kernel's first run of the cell
                results[case].append(took)
                in_stages[case].append(sum(e["ms"] for e in events if e["type"] == "stage"))
            else:
                firsts[case] = took
    sys.stdout = sys.__stdout__
    print(json.dumps({"later": results, "first": firsts, "in_stages": in_stages}))


def measure_in_process(mode: str, repeat: int, pause_s: float) -> dict[str, Any]:
    """The warm engine's runs (``--notebook``): ``later`` (edits, per case) and ``first`` (its first run of each cell, after the
    cells before it: the compiles of the cell's own eager operations, as a new
    client's first run in jaxplay pays them)."""
    out = subprocess.run(
        [
            *(sys.executable, __file__, mode, "--repeat", str(repeat)),
            *("--only", ",".join(CASES), "--pause", str(pause_s)),
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


# --- jaxplay: a real server, POST /api/v1/runs ------------------------------------------


def start_server(workdir: Path, tokens: list[str]) -> Any:
    from tests.support.live_server import LiveServer

    env = {
        "JAXPLAY_API_TOKENS": json.dumps(tokens),
        # a jail per client and one spare: a new client never waits for a full pool
        # to retire another client's jail and start one (a jail's start, not a run)
        "JAXPLAY_POOL_SIZE": str(len(tokens) + 1),
        "JAXPLAY_RATE_LIMIT_PER_MINUTE": "100000",
        "JAXPLAY_RATE_LIMIT_BURST": "100000",
    }
    return LiveServer(workdir / "edit.sqlite3", "--pool", "zygote", env=env).start(180)


#: the engine's stages a run reports (``stage`` events), in order
STAGES = ["args", "trace", "lower", "compile", "execute"]


def timed_post(
    client: Any, url: str, token: str, body: dict[str, Any]
) -> tuple[float, float, dict[str, float]]:
    """(ms to done, ms to the first jaxpr event, ms per stage) of one run."""
    started = time.perf_counter()
    first = float("nan")
    status, done = "?", {}
    stages: dict[str, float] = {}
    with client.stream(
        "POST",
        url + "/api/v1/runs",
        json=body,
        headers={"Authorization": f"Bearer {token}", "Accept": "application/x-ndjson"},
        timeout=120,
    ) as response:
        if response.status_code != 200:
            raise SystemExit(f"{response.status_code}: {response.read()[:500]!r}")
        for line in response.iter_lines():
            if not line:
                continue
            event = json.loads(line)
            if event.get("type") == "jaxpr" and first != first:
                first = (time.perf_counter() - started) * 1000
            if event.get("type") == "stage":
                stages[event["stage"]] = stages.get(event["stage"], 0.0) + event["ms"]
            if event.get("type") == "done":
                status, done = event.get("status"), event
    if status != "ok":
        raise SystemExit(f"a run ended {status}: {body['code']!r}: {done}")
    return (time.perf_counter() - started) * 1000, first, stages


def wait_for_spare(client: Any, url: str, timeout_s: float = 120.0) -> float:
    """Wait until the pool has a ready spare jail (its first warm child warm), so that
    a new client's first run measures that run, not a jail still starting. Seconds
    waited."""
    started = time.perf_counter()
    while pool_figures(client, url).get("spares", 0) < 1:
        if time.perf_counter() - started > timeout_s:
            raise SystemExit(f"no spare jail ready after {timeout_s:g} s")
        time.sleep(0.1)
    return time.perf_counter() - started


def measure_jaxplay(repeat: int, pause_s: float, workdir: Path) -> dict[str, Any]:
    import httpx

    tokens = ["edit-server", *(f"edit-{i}" for i in range(len(CASES)))]
    server = start_server(workdir, tokens)
    url = server.url
    later: dict[str, list[float]] = {c: [] for c in CASES}
    later_stages: dict[str, list[dict[str, float]]] = {c: [] for c in CASES}
    first_jaxpr: list[float] = []
    new_client: dict[str, float] = {}
    new_stages: dict[str, dict[str, float]] = {}
    try:
        with httpx.Client() as client:
            # the server's own first run (imports, a spare's start) is not a client's:
            # a token of its own, so that every case's first run is a new client's
            server_case = "jacrev" if "jacrev" in CASES else list(CASES)[-1]
            timed_post(client, url, "edit-server", request(server_case, 10_000))
            for i, case in enumerate(CASES):
                token = f"edit-{i}"
                time.sleep(pause_s)
                wait_for_spare(client, url)  # a ready spare jail for the new client
                new_client[case], _, new_stages[case] = timed_post(
                    client, url, token, request(case, 0)
                )
                for edit in range(1, repeat + 1):
                    time.sleep(pause_s)
                    ms, jaxpr_ms, stages = timed_post(client, url, token, request(case, edit))
                    later[case].append(ms)
                    later_stages[case].append(stages)
                    first_jaxpr.append(jaxpr_ms)
            pool = pool_figures(client, url)
    finally:
        server.stop(timeout_s=30)
    return {
        "later": later,
        "later_stages": later_stages,
        "first_jaxpr": first_jaxpr,
        "new_client": new_client,
        "new_stages": new_stages,
        "pool": pool,
    }


def pool_figures(client: Any, url: str) -> dict[str, float]:
    """The pool's own figures (``jaxplay_pool{figure=...}`` on /metrics)."""
    text = client.get(url + "/metrics", timeout=30).text
    figures = {}
    for line in text.splitlines():
        if line.startswith('jaxplay_pool{figure="'):
            name, value = line.split('"')[1], line.rsplit(" ", 1)[1]
            figures[name] = float(value)
    return figures


# --- a fresh process per run ----------------------------------------------------------


async def measure_fresh(repeat: int) -> dict[str, list[float]]:
    from sandbox.pool.subprocess_pool import SubprocessPool
    from sandbox.protocol import RunRequest

    pool = SubprocessPool(max_concurrent=1)
    fresh: dict[str, list[float]] = {c: [] for c in CASES}
    for edit in range(repeat):
        for case in CASES:
            body = {k: v for k, v in request(case, edit).items() if k != "cache"}
            started = time.perf_counter()
            run = await pool.submit(RunRequest(**body), "fresh")
            async for event in run.events():
                if event["type"] == "done":
                    assert event["status"] == "ok", (case, event)
            fresh[case].append((time.perf_counter() - started) * 1000)
    return fresh


def print_stages(jaxplay: dict[str, Any]) -> None:
    """Where a new client's first run spends its time beyond its later runs: each
    stage's ms (the run's ``stage`` events), first run / median of the later runs;
    ``rest`` is the run's time not in a stage (server, pool, jail, engine set-up)."""
    print("a new client's first run / its later runs, per stage (ms):")
    print(f"{'case':<20}" + "".join(f"{s:>12}" for s in [*STAGES, "rest"]))
    for case in CASES:
        first = jaxplay["new_stages"][case]
        laters = jaxplay["later_stages"][case]
        cells = []
        for stage in STAGES:
            later = statistics.median(s.get(stage, 0.0) for s in laters)
            cells.append(f"{first.get(stage, 0.0):.0f}/{later:.0f}")
        rest_first = jaxplay["new_client"][case] - sum(first.values())
        rest_later = statistics.median(
            ms - sum(s.values()) for ms, s in zip(jaxplay["later"][case], laters, strict=True)
        )
        cells.append(f"{rest_first:.0f}/{rest_later:.0f}")
        print(f"{case:<20}" + "".join(f"{c:>12}" for c in cells))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=6, help="edits per case after the first run")
    parser.add_argument("--fresh-repeat", type=int, default=2)
    parser.add_argument(
        "--pause", type=float, default=0.5, help="seconds between a client's runs (reading)"
    )
    parser.add_argument("--cases", type=int, default=len(CASES), help="the first N cases only")
    parser.add_argument("--only", default="", help="these cases only (names, comma-separated)")
    parser.add_argument(
        "--quick", action="store_true", help="a check that it works: 2 cases, 1 edit, no pause"
    )
    parser.add_argument("--notebook", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.quick:
        args.cases, args.repeat, args.fresh_repeat, args.pause = 2, 1, 1, 0.0
    for name in list(CASES)[args.cases :]:
        del CASES[name]
    if args.only:
        wanted = {n.strip() for n in args.only.split(",")}
        unknown = wanted - set(CASES)
        if unknown:
            parser.error(f"no such case: {', '.join(sorted(unknown))} (cases: {', '.join(CASES)})")
        for name in list(CASES):
            if name not in wanted:
                del CASES[name]
    if args.notebook:
        notebook_main(args.repeat, args.pause)
        return
    load = os.getloadavg()[0]
    rounds = [[(case, request(case, edit)) for case in CASES] for edit in range(args.repeat + 1)]
    # every floor idles as long before each run as jaxplay's client does: a notebook
    # user reads the last result too, and a run after a pause finds the CPU's caches
    # cold (measured back to back, the floors ran warmer than any edit a person makes)
    plain_kernel = plain_jax.measure(rounds, pause_s=args.pause)
    plain, plain_first = plain_kernel["later"], plain_kernel["first"]
    # the same cells on one CPU, as a jail runs by default (JAXPLAY_CPUS=1):
    # XLA's compile and its eager ops use the CPUs they have
    plain_one = plain_jax.measure(rounds, one_cpu=True, pause_s=args.pause)["later"]
    kernel = measure_in_process("--notebook", args.repeat, args.pause)
    notebook, notebook_first = kernel["later"], kernel["first"]
    with tempfile.TemporaryDirectory(prefix="jaxplay-edit-") as workdir:
        jaxplay = measure_jaxplay(args.repeat, args.pause, Path(workdir))
    fresh = asyncio.run(measure_fresh(args.fresh_repeat))
    later = jaxplay["later"]
    print(
        f"{len(os.sched_getaffinity(0))} CPUs, load average {load:.1f} at the start, "
        f"{args.pause:g} s before each run (jaxplay's and the floors'); medians in ms"
    )
    print(
        "floors: plain = plain JAX as a notebook user types the cell (all CPUs); pl 1cpu = "
        "the same on one CPU; engine = jaxplay's engine in one warm process (one CPU, like "
        "a jail); where the engine's time goes, stage by stage: benchmarks/engine/engine_stages.py"
    )
    print(
        f"{'case':<20}{'plain':>8}{'pl 1cpu':>8}{'engine':>8}{'jaxplay':>9}{'jp/plain':>9}"
        f"{'jp/pl1':>7}{'jp/eng':>8}"
        f"{'fresh':>8}{'fresh/jp':>9}{'new client':>11}{'new/later':>10}"
        f"{'plain 1st':>10}{'new/pl 1st':>11}{'eng 1st':>8}{'new/eng 1st':>12}"
    )
    ratios, one_cpu_ratios, engine_ratios, speedups, firsts = [], [], [], [], []
    against_plain, against_kernel = [], []
    for case in CASES:
        pl, nb, jp, fr = (statistics.median(d[case]) for d in (plain, notebook, later, fresh))
        pl1 = statistics.median(plain_one[case])
        new = jaxplay["new_client"][case]
        ratios.append(jp / pl)
        one_cpu_ratios.append(jp / pl1)
        engine_ratios.append(jp / nb)
        speedups.append(fr / jp)
        firsts.append(new / jp)
        pl_first, nb_first = plain_first[case], notebook_first[case]
        against_plain.append(new / pl_first)
        against_kernel.append(new / nb_first)
        print(
            f"{case:<20}{pl:>8.1f}{pl1:>8.1f}{nb:>8.1f}{jp:>9.1f}{jp / pl:>9.2f}{jp / pl1:>7.2f}"
            f"{jp / nb:>8.2f}"
            f"{fr:>8.1f}{fr / jp:>8.1f}x{new:>11.1f}{new / jp:>9.2f}x"
            f"{pl_first:>10.1f}{new / pl_first:>10.2f}x{nb_first:>8.1f}{new / nb_first:>11.2f}x"
        )
    jaxprs = [v for v in jaxplay["first_jaxpr"] if v == v]
    print(
        f"median jaxplay / plain JAX in a notebook (the headline): "
        f"{statistics.median(ratios):.2f} (per case {min(ratios):.2f}-{max(ratios):.2f}; "
        f"targets: issue 11 <= 1.5, issue 32 <= 1.2)"
    )
    print(
        f"median jaxplay / plain JAX on one CPU, as a jail has: "
        f"{statistics.median(one_cpu_ratios):.2f} "
        f"(per case {min(one_cpu_ratios):.2f}-{max(one_cpu_ratios):.2f})"
    )
    print(
        f"median jaxplay / jaxplay's engine in one process: {statistics.median(engine_ratios):.2f}"
        f" (per case {min(engine_ratios):.2f}-{max(engine_ratios):.2f})"
    )
    # the serving's cost per run: each jaxplay run less its engine's median for the cell
    serving = [ms - statistics.median(notebook[case]) for case in CASES for ms in later[case]]
    p95 = percentile(serving, 0.95)
    print(
        f"jaxplay's run less its engine's in one process (server, pool, jail, relay), per "
        f"run: median {statistics.median(serving):.1f} ms, p95 {p95:.1f} ms "
        f"({len(serving)} runs; issue 32's target: p95 <= 20 ms)"
    )
    # what the figure above carries of the engine's own spread: its runs in one warm
    # process less their median, measured the same way (no server, pool or jail)
    spread = [ms - statistics.median(notebook[case]) for case in CASES for ms in notebook[case]]
    print(
        f"the engine's own runs less their median, per run: p95 {percentile(spread, 0.95):.1f} ms "
        f"({len(spread)} runs: the spread any figure above has without serving anything)"
    )
    # the serving of each run alone: its time outside the engine's stages (whose
    # spread is the engine's, measured in the jail by the run itself) less what the
    # engine in one process spends outside them (its median for the cell)
    outside = {
        case: statistics.median(
            w - st for w, st in zip(notebook[case], kernel["in_stages"][case], strict=True)
        )
        for case in CASES
    }
    paired = [
        ms - sum(stages.values()) - outside[case]
        for case in CASES
        for ms, stages in zip(later[case], jaxplay["later_stages"][case], strict=True)
    ]
    print(
        f"the same, each run's own stage times taken out (the serving without the engine's "
        f"spread): median {statistics.median(paired):.1f} ms, p95 {percentile(paired, 0.95):.1f} ms"
    )
    print(f"median fresh/jaxplay: {statistics.median(speedups):.1f}x (target >= 10x)")
    print(
        f"first jaxpr event after the request: median {statistics.median(jaxprs):.1f} ms, "
        f"max {max(jaxprs):.1f} ms (target 40)"
    )
    print(
        f"a new client's first run / its later runs: median {statistics.median(firsts):.2f}x "
        f"(target <= 2)"
    )
    print(
        f"a new client's first run / a warm kernel's first run of the same cell: median "
        f"{statistics.median(against_plain):.2f}x (plain JAX), "
        f"{statistics.median(against_kernel):.2f}x (jaxplay's engine)"
    )
    print_stages(jaxplay)
    pool = jaxplay["pool"]
    print(
        f"runs served by a process kept from the client's previous run: "
        f"{pool.get('reused', 0):.0f} of {pool.get('runs', 0):.0f} "
        f"(JAXPLAY_POOL_REUSE_RUNS; zygotes retired: {pool.get('retired', 0):.0f})"
    )


if __name__ == "__main__":
    from benchmarks.support.reproduce import announce

    announce()
    main()
