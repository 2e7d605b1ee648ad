"""The ground floor of the server: the one settings object (settings.py), the wire
models (wire.py), the one error shape (errors.py), structured logs (logs.py) and the
metrics registry (metrics.py). Every other package of backend.app may import these; they
import nothing of backend.app outside core (and only the sandbox's declarations)."""
