"""Runs over Redis Streams: the names, the job format, and the worker's loop.

The server side is ``sandbox.pool.redis_pool.RedisPool`` (a ``Pool`` like the local
ones); the machine side is ``sandbox.queue.worker.QueueWorker`` (what
``jaxplay worker`` runs around a local jailed pool). They share only what is here
and the worker protocol. Nothing in this package imports JAX or the server.
"""
