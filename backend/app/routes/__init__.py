"""Thin routers: parse, call a service, answer. A route imports services (services/,
relay/, trust/, tenancy/...), outside/ and web/, never another route
(``routes-independent``); only the factory imports routes (``app-layers``)."""
