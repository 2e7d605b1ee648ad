"""Thin routers: parse, call a service, answer. The work is in backend.app.*."""
