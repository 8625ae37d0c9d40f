"""The local pipe between the coordinator and its fan-out processes: length-prefixed protobuf
frames (FanOutBatch down, FanOutEvent up), and which process serves which node."""

import asyncio
import struct
import zlib

_LENGTH = struct.Struct(">I")


def share_of(node_id: str, processes: int) -> int:
    """The fan-out process (0..processes-1) that serves this node's streams: fixed by its id."""
    return zlib.crc32(node_id.encode()) % processes


def frame(payload: bytes) -> bytes:
    return _LENGTH.pack(len(payload)) + payload


async def read_frame(reader: asyncio.StreamReader) -> bytes | None:
    """The next frame's payload; None at the end of the pipe."""
    try:
        head = await reader.readexactly(_LENGTH.size)
        return await reader.readexactly(_LENGTH.unpack(head)[0])
    except asyncio.IncompleteReadError:
        return None
