"""The zygote: what runs inside a warm pool's jail, and the pool's side of it.

In the jail: ``main`` (the zygote process: imports JAX once through the engine's
interface, sandbox/engine/api.py, then forks a child per run), ``child`` (a forked
child: its warm-up, a run, the runs of a kept process), ``cleanup`` (nothing of a
run outlives it), ``watch`` (a kept process's Python state against its baseline)
and ``kernel_view`` (what the kernel holds for it, read from /proc). Between the
two sides: ``control`` (the typed, versioned messages). On the host: ``handle``
(one zygote; the only writer of its state), ``run`` (one run's supervisor) and
``pool`` (``ZygotePool``). See docs/sandbox.md.
"""
