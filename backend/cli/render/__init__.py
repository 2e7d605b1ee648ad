"""The text ``jaxplay run`` prints for a stream of events: events.py dispatches each event
to its renderer; each other module renders one output (autodiff, checks, kernels, memory,
numerics, trace_values, understand) and imports no other renderer. Only the sandbox's
protocol and backend.app.relay.timeouts are imported from outside."""
