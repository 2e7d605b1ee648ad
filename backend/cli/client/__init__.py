"""A client of a jaxplay server, as ``jaxplay run --server URL`` and scripts use it: the
REST calls (rest.py) and the anonymous session the CLI keeps between runs
(session_store.py, above rest.py: ``cli-client-layers``)."""
