"""Asyncio readers on the read ends of pipes (a zygote's log, a run's events and
stderr): the transport owns the descriptor and closes it."""

from __future__ import annotations

import asyncio


async def pipe_reader_transport(
    fd: int, limit: int = 2**16
) -> tuple[asyncio.StreamReader, asyncio.BaseTransport]:
    """A StreamReader on the read end ``fd`` of a pipe (the transport owns and closes it)."""
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=limit)
    transport, _ = await loop.connect_read_pipe(
        lambda: asyncio.StreamReaderProtocol(reader),
        open(fd, "rb", buffering=0),  # noqa: SIM115 (the transport owns and closes it)
    )
    return reader, transport


async def pipe_reader(fd: int) -> asyncio.StreamReader:
    return (await pipe_reader_transport(fd))[0]
