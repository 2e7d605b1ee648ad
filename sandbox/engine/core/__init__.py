"""The engine's core: a run through its stages (run.py), the pipeline built from the
request's transforms, the user's program, the event stream, source maps, errors,
the warm-up, and what several outputs share (XLA's dump, the profiler, meshes,
Pallas's interpret mode, the remarks collector, JAX version adapters). It never
imports an output: it finds each by name (registry.py)."""
