"""The stand-in worker process of the warm engine (warm_engine.py): the supervisor
starts it as it would start ``python -m sandbox.engine``; it hands its stdin, stdout
and stderr to the warm engine, which forks a child to run on them, and exits as that
child exits (a status, or the same signal). Killed, it takes the child with it: the
engine kills a run whose stand-in has gone.

Run with ``python -S``: the standard library only, so it starts in milliseconds.
Usage: warm_engine_client.py SOCKET [ignored arguments: the worker's ``-m sandbox.engine``]
"""

import os
import signal
import socket
import struct
import sys


def main() -> None:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
        conn.connect(sys.argv[1])
        socket.send_fds(conn, [b"r"], [0, 1, 2])
        for fd in (0, 1, 2):
            os.close(fd)  # the child holds the pipes now: their ends are its to close
        status = b""
        while len(status) < 4:
            chunk = conn.recv(4 - len(status))
            if not chunk:
                os._exit(70)  # the warm engine went away mid-run
            status += chunk
    (code,) = struct.unpack("!i", status)
    if code < 0:
        signal.signal(-code, signal.SIG_DFL)
        os.kill(os.getpid(), -code)
    os._exit(code)


main()
