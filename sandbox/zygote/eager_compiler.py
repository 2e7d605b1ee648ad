"""The jail template's eager compiler: one trusted process per template that compiles
eager primitives from the descriptions runs report, and hands what it compiled to
every jail's zygote to write into the jail's own cache (the run's side:
sandbox/engine/core/shared_eager.py; the zygote's: eager_link.py).

The template forks it once, before its first jail, as it forks the seed's child
(seed.py); unlike that child it stays. It never runs anyone's code and never talks to
a run: each jail's *zygote* (which never runs anyone's code either) holds its
connection, and sends it two things:

- ``L`` + descriptions (JSON lines in shared_eager's codec, what a run's set-up
  compiled that missed): each is checked field by field and, if new, queued; while
  nothing else waits it compiles the description itself, with JAX's own AOT path, and
  JAX's persistent cache (a private directory only it writes) stores the executable
  under the key that compile computes. A key a run wrote beside a description is
  never used: a false one stores nothing under it.
- ``P`` + ``{"since": N}``: the entries it learnt after its N-th, each ``E`` +
  ``{"name", "made"}`` (its file's time) + ``\n`` + bytes, then ``D`` + ``{"next": M}``.

Bounds, so that no jail can make it a burden: each connection may have it learn
``LEARN_PER_JAIL`` descriptions and take ``PULL_BYTES`` a pull, ``PLANT_BYTES`` in
all; ``QUEUE`` descriptions wait at most; the store holds ``MAX_ENTRIES`` entries and
``MAX_BYTES`` bytes (then it learns no more and says so once); a message it cannot
read as one of the two, or a reply the zygote does not take within ``SEND_S``, ends
that connection.

Only a template whose jails run on the CPU has one: it starts a backend outside any
jail, which must never open an accelerator's device nodes (seed.py). It ends with
the template (a parent-death SIGTERM), its directory with it; a directory left by one
killed outright is removed by the next compiler that starts on the machine.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import shutil
import signal
import socket
import sys
import tempfile
import traceback
from collections import OrderedDict
from typing import NoReturn

from sandbox.engine.core import persistent_cache, shared_eager
from sandbox.jail.syscalls import PR_SET_PDEATHSIG, prctl
from sandbox.zygote import seed

LEARN_PER_JAIL = 32
QUEUE = 64
PULL_BYTES = 1 << 20
PLANT_BYTES = 8 << 20
SEND_S = 2.0
#: a message from a zygote: its kind and up to this many bytes
MAX_MESSAGE = 64 << 10
MAX_ENTRIES = 2048
MAX_BYTES = 32 << 20
#: its store's name in the temporary directory: this, its pid, a random part
PREFIX = "jaxplay-eager-"


class EagerCompiler:
    """The template's handle on its compiler: a socket to hand it jails' ends on."""

    def __init__(self, pid: int, control: socket.socket) -> None:
        self.pid, self._control = pid, control

    def connection(self) -> int | None:
        """A new jail's end of a socket pair whose other end the compiler now serves
        (None if the compiler is gone: the jail compiles itself)."""
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            socket.send_fds(self._control, [b"j"], [theirs.fileno()])
        except OSError:
            ours.close()
            return None
        finally:
            theirs.close()
        return ours.detach()


def start() -> EagerCompiler | None:
    """In the template, after its imports and before its first fork of a jail: the
    compiler's child, or None where the jails do not run on the CPU."""
    if not seed.backend_outside_jails():
        return None
    control, child_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        control.close()
        _child(child_end)
    child_end.close()
    control.setblocking(False)
    return EagerCompiler(pid, control)


def _child(control: socket.socket) -> NoReturn:
    # the template gone: SIGTERM, so that its store goes too (SystemExit at the next
    # bytecode, after a compile in progress)
    signal.signal(signal.SIGTERM, _end)
    directory = None
    try:
        prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
        if os.getppid() == 1:
            os._exit(0)
        os.closerange(3, control.fileno())  # the template's own socket among them
        os.closerange(control.fileno() + 1, 1 << 16)
        _sweep(tempfile.gettempdir())
        directory = tempfile.mkdtemp(prefix=f"{PREFIX}{os.getpid()}-")
        persistent_cache.enable(directory)
        Server(control, directory).serve()
    except SystemExit:
        pass
    except BaseException:
        traceback.print_exc()
    finally:
        if directory is not None:
            shutil.rmtree(directory, ignore_errors=True)
    os._exit(0)


def _end(signum: int, frame: object) -> NoReturn:
    raise SystemExit(0)


def _sweep(top: str) -> None:
    """The stores of compilers that died without removing theirs (killed outright):
    each directory is named with its compiler's pid, and one whose pid is not alive is
    removed (one of another user's stays: not ours to remove)."""
    for name in os.listdir(top):
        pid = name[len(PREFIX) :].split("-", 1)[0]
        if not name.startswith(PREFIX) or not pid.isdigit() or os.path.exists(f"/proc/{pid}"):
            continue
        shutil.rmtree(os.path.join(top, name), ignore_errors=True)


class Server:
    """The compiler's loop: zygotes' messages first, descriptions learnt when idle."""

    def __init__(self, control: socket.socket, directory: str) -> None:
        self.control, self.directory = control, directory
        self.jails: dict[int, socket.socket] = {}
        self.learns: dict[int, int] = {}
        self.planted: dict[int, int] = {}
        #: key -> the description that may make it, in the order reported
        self.queue: OrderedDict[str, shared_eager.Description] = OrderedDict()
        #: the entries' names, in the order learnt (a pull's ``since`` counts them)
        self.log: list[str] = []
        self.full = False

    def serve(self) -> None:
        # no backend until the first description is compiled: a template's start (and
        # its first jails', beside it on the machine's CPUs) does not pay for one
        while True:
            fds = [self.control.fileno(), *self.jails]
            ready, _, _ = select.select(fds, [], [], 0 if self.queue else None)
            if not ready and self.queue:
                self.learn_one()
                continue
            if self.control.fileno() in ready and not self.take_jail():
                return  # the template is gone
            for fd in ready:
                if fd in self.jails:
                    self.take_message(fd)

    def take_jail(self) -> bool:
        try:
            data, fds, _, _ = socket.recv_fds(self.control, 16, 1)
        except OSError:
            return False
        if not data:
            return False
        for fd in fds:
            sock = socket.socket(fileno=fd)
            sock.settimeout(SEND_S)
            self.jails[fd] = sock
            self.learns[fd] = self.planted[fd] = 0
        return True

    def drop(self, fd: int) -> None:
        sock = self.jails.pop(fd, None)
        self.learns.pop(fd, None)
        self.planted.pop(fd, None)
        if sock is not None:
            sock.close()

    def take_message(self, fd: int) -> None:
        try:
            data = self.jails[fd].recv(MAX_MESSAGE + 2)
        except OSError:
            data = b""
        kind, body = data[:1], data[1:]
        if len(body) > MAX_MESSAGE:
            kind = b""
        if kind == b"L":
            self.take_descriptions(fd, body)
        elif kind == b"P":
            self.send_entries(fd, body)
        else:  # the zygote is gone, or this is no zygote's message
            self.drop(fd)

    def take_descriptions(self, fd: int, body: bytes) -> None:
        for line in body.split(b"\n")[: shared_eager.MAX_REPORTED]:
            try:
                description = shared_eager.Description.parse(line)
            except shared_eager.Unshareable:
                continue  # a run's word: what it is not, it is not
            if (
                self.full
                or description.key in self.queue
                or self.entry(description.key) is not None
                or self.learns[fd] >= LEARN_PER_JAIL
                or len(self.queue) >= QUEUE
            ):
                continue
            self.learns[fd] += 1
            self.queue[description.key] = description

    def send_entries(self, fd: int, body: bytes) -> None:
        try:
            since = json.loads(body)["since"]
            if not isinstance(since, int) or isinstance(since, bool) or since < 0:
                raise ValueError(since)
        except (ValueError, KeyError, TypeError):
            self.drop(fd)
            return
        sock, sent, at = self.jails[fd], 0, min(since, len(self.log))
        try:
            while at < len(self.log) and sent < PULL_BYTES:
                name = self.log[at]
                entry = self.entry(name[: -len("-cache")])
                if entry is not None:
                    if self.planted[fd] + len(entry) > PLANT_BYTES:
                        break
                    # with its time, so that every jail's copy is the same file
                    made = os.stat(os.path.join(self.directory, name)).st_mtime_ns
                    head = json.dumps({"name": name, "made": made}).encode()
                    sock.send(b"E" + head + b"\n" + entry)
                    sent += len(entry)
                    self.planted[fd] += len(entry)
                at += 1
            sock.send(b"D" + json.dumps({"next": at}).encode())
        except OSError:  # it does not take them: no more
            self.drop(fd)

    def entry(self, key: str) -> bytes | None:
        path = os.path.join(self.directory, f"{key}-cache")
        try:
            with open(path, "rb") as f:
                data = f.read(shared_eager.MAX_ENTRY + 1)
        except OSError:
            return None
        return data if len(data) <= shared_eager.MAX_ENTRY else None

    def learn_one(self) -> None:
        _, description = self.queue.popitem(last=False)
        if self.entry(description.key) is not None:
            return
        if not self.room():
            self.full = True
            self.queue.clear()
            print("jaxplay: eager compiler: its store is full; it learns no more", file=sys.stderr)
            return
        before = set(os.listdir(self.directory))
        try:
            compile_description(description)
        except Exception as exc:  # JAX refused the description: nothing is stored
            print(
                f"jaxplay: eager compiler: {description.prim}: {type(exc).__name__}",
                file=sys.stderr,
            )
            return
        finally:
            _forget()
        made = sorted(n for n in set(os.listdir(self.directory)) - before if n.endswith("-cache"))
        self.log += made

    def room(self) -> bool:
        names = os.listdir(self.directory)
        if len(names) >= MAX_ENTRIES:
            return False
        size = 0
        for name in names:
            with contextlib.suppress(OSError):
                size += os.stat(os.path.join(self.directory, name)).st_size
        return size < MAX_BYTES


def compile_description(request: shared_eager.Description) -> None:
    """The description's executable, compiled here as the jail's eager call would
    have (the same callable, JAX's own), and stored by JAX's persistent cache."""
    import jax
    from jax._src import dispatch
    from jax._src.lax import lax as lax_internal

    prim = getattr(lax_internal, f"{request.prim}_p")
    params = {k: shared_eager.decode_param(v) for k, v in request.params.items()}
    args = [
        jax.ShapeDtypeStruct(a.shape, jax.numpy.dtype(a.dtype), weak_type=a.weak_type)
        for a in request.avals
    ]
    dispatch.xla_primitive_callable(prim, **params).lower(*args).compile()


def _forget() -> None:
    """The compiled executables leave this process's memory (the store keeps them)."""
    import jax

    with contextlib.suppress(Exception):
        jax.clear_caches()
