"""The jaxplay server: ``create_app(settings)`` (see factory.py). Never imports JAX."""

from backend.app.factory import create_app
from backend.app.settings import Settings

__all__ = ["Settings", "create_app"]
