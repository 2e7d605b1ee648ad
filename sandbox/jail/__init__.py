"""The jail: bubblewrap, seccomp, cgroups and rlimits around every run of user code.

See docs/sandbox.md. ``Jailer`` holds what all jails on a host share; ``Jail`` is one;
``JailedRun`` runs one request in a fresh jail; the zygote (``zygote.py``) is what the
warm pool runs inside each jail.
"""
