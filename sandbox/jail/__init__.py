"""The jail: bubblewrap, seccomp, cgroups and rlimits around every run of user code.

See docs/sandbox.md. ``Jailer`` holds what all jails on a host share; ``Jail`` is one.
What runs in a jail is supervised from above: one run in a fresh jail is
sandbox/supervisor/jailed.py's ``JailedRun``, the warm pool's zygotes sandbox/zygote/.
"""
