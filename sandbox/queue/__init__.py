"""Runs over Redis Streams: the remote pool, the worker's loop, and what they share.

All of jaxplay's Redis transport is here. The server side is
``client_pool.RedisPool`` (a ``Pool`` like the local ones, registered as ``redis``);
the machine side is ``worker.QueueWorker`` (what ``jaxplay worker`` runs around a
local jailed pool). They share ``keys`` (names, the job format), ``transport`` (the
client and stream helpers) and the worker protocol. This package builds on
``sandbox.pool`` (the interface), never the other way round; nothing in it imports
JAX or the server.
"""
