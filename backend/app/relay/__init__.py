"""A run from a validated request to a stream of events: the pool the settings name
(pools.py), the run service that checks, admits, consults the cache and starts a run
(service.py), the relay of its events (stream.py), what a run out of time says
(timeouts.py), the public figures each run leaves (figures.py) and the comparison of one
request across JAX versions (compare.py). It may import trust, tenancy, storage and core;
never web (``app-layers``: ``relay | web``), services, outside or routes."""
