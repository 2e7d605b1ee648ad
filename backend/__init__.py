"""The server and the command line. Never imports JAX and never runs user code."""
