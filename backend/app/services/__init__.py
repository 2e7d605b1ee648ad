"""What the routes share: the services the lifespan builds, handed out as a dependency
(container.py), and the steps more than one route takes on a shared link (links.py:
store a snippet, read one, the code a link names). Routes import these, never each other
(``routes-independent``). It may import relay, trust, tenancy, storage and core; never
web or outside (``services-no-web``), nor routes."""
