"""The text ``jaxplay run`` prints for a stream of events: events.py dispatches each event
to its renderer; each other module renders one output (autodiff, checks, kernels, memory,
numerics, trace_values, understand) and imports no other renderer
(``cli-render-layers``)."""
