"""Pools run requests somewhere and stream their events back.

``base`` is the one interface (``Pool``, its handle contract, the optional
capabilities); the local pools live here (``zygote_pool``, the jailed warm pool
over sandbox/zygote/; ``subprocess_pool``, ``fake``, ``versioned``), the Redis pool
in sandbox/queue/. Every one is built by name through sandbox/assembly/pool_registry.py.
"""
