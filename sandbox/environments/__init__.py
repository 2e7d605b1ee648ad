"""The JAX environments runs execute in: the offered JAX versions and where each lives
(``versions``), the curated libraries each version's runs may import (``libraries``)
and the other versions of one a request may pick (``library_choices``), and JAX's
optional extras the operator installs (``extras``: ``tpu_extra``, ``cuda_extra``).

The bottom of the sandbox's layers: it imports nothing else of jaxplay, and never JAX
(the server reads versions from package metadata). Installing anything here is an
operator's act, never a run's.
"""
