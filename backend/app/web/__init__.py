"""Serving HTTP and the page: the page's HTML (page.py) and its early run script
(early_run.py), the built assets (assets.py) and compression, the ASGI middleware (body
limit, headers, Host and Origin checks, the client's presence), the REST API called
in-process (local_api.py), op docs on hover (op_docs.py) and static files. It may import
tenancy (admission's client-gone signal) and core; never relay, trust or storage
(``web-no-runs``), nor services, outside or routes (``app-layers``)."""
