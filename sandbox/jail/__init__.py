"""The jail: bubblewrap, seccomp, cgroups and rlimits around every run of user code.

See docs/sandbox.md. ``Jailer`` holds what all jails on a host share; ``Jail`` is one;
one supervised run in a fresh jail is
sandbox/supervisor/jailed.py's ``JailedRun``. What runs inside a warm pool's jail
(the zygote) is sandbox/zygote/.
"""
