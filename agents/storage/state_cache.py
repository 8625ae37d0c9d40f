"""The agent's on-disk copy of its last desired state, verified before use.

Layout: magic, payload length (8 bytes, big-endian), SHA-256 of the payload, payload
(a serialized DesiredState). A truncated or altered file fails the check and is not applied.
"""

import hashlib
import struct

from vnode_sync.durable import write_atomically
from vnode_sync.wire import vnode_pb2 as pb

MAGIC = b"VNSCACHE1\n"
_HEADER = struct.Struct(">Q32s")


class BadCache(ValueError):
    """The cache file is truncated, altered or not a state cache."""


def encode_state_cache(state: pb.DesiredState) -> bytes:
    payload = state.SerializeToString()
    return MAGIC + _HEADER.pack(len(payload), hashlib.sha256(payload).digest()) + payload


def decode_state_cache(data: bytes) -> pb.DesiredState:
    if not data.startswith(MAGIC):
        raise BadCache("not a vnode-sync state cache (bad header)")
    header_end = len(MAGIC) + _HEADER.size
    if len(data) < header_end:
        raise BadCache(f"truncated header ({len(data)} bytes)")
    length, digest = _HEADER.unpack(data[len(MAGIC):header_end])
    payload = data[header_end:]
    if len(payload) != length:
        raise BadCache(f"length {len(payload)} bytes, expected {length} (truncated or extended)")
    if hashlib.sha256(payload).digest() != digest:
        raise BadCache("checksum mismatch (corrupted)")
    state = pb.DesiredState()
    try:
        state.ParseFromString(payload)
    except Exception as e:  # the checksum matched, so this is a foreign writer's bytes
        raise BadCache(f"undecodable: {e}") from e
    return state


def save_state_cache(path: str, state: pb.DesiredState) -> None:
    """Replace the cache atomically and durably: a restart finds the old state or the new one."""
    write_atomically(path, encode_state_cache(state), mode=0o600)
