"""Everything that touches user code: the engine, the jail and the warm pool.

Never imports ``backend`` or FastAPI. Only ``sandbox.engine`` imports JAX, and only
inside the worker process.
"""
