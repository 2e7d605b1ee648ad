"""The ground floor of the server: the one settings object (settings.py) and its table
(settings_table.py), the wire models (wire.py), the one error shape (errors.py),
structured logs (logs.py) and the metrics registry (metrics.py). Every other package of
backend.app may import these; they import nothing of backend.app outside core (the
bottom layer of ``app-layers``), and errors and settings_table are the only ones that
import another of core's modules (``app-core-layers``)."""
