"""The engine's outputs: one module per output of ``sandbox.protocol.OUTPUT_TABLE``,
named as its row, holding its row as ``OUTPUT`` (core/output.py); an output with
modules of its own is a package. Each imports the core and no other output; the
core loads them by name (core/registry.py)."""
