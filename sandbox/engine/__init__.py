"""The engine: runs one request with JAX and emits its events (SPEC §2).

Runs only inside a worker process (``python -m sandbox.engine`` or a child forked
from a warm zygote); nothing here is imported by the server.
"""
