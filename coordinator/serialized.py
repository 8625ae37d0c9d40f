"""Protobuf messages written as serialized pieces, for answers too large to build as message objects.

Two facts of the protobuf wire format (protobuf.dev/programming-guides/encoding) make this safe:
a length-delimited field is its tag, its length as a varint and its bytes; and a serialized
message followed by another parses as their merge (repeated fields concatenated, others replaced).
"""


def varint(value: int) -> bytes:
    out = bytearray()
    while value > 0x7F:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def field_entry(field_number: int, body: bytes) -> bytes:
    """One entry of a message (or repeated message) field: tag, length, the serialized message."""
    return field_head(field_number, len(body)) + body


def field_head(field_number: int, length: int) -> bytes:
    """The tag and length of a length-delimited field whose LENGTH bytes follow (to join large bodies once)."""
    return varint(field_number << 3 | 2) + varint(length)


def string_entries(field_number: int, values: list[str]) -> bytes:
    """A repeated string field: one entry per value, in order."""
    return b"".join(field_entry(field_number, value.encode()) for value in values)


def packed_floats(field_number: int, values) -> list[bytes]:
    """A packed `repeated float` field from a numpy array, as little-endian 32-bit floats (the wire's
    fixed32 encoding), without a Python object per value: its pieces, to be joined."""
    body = values.astype("<f4").tobytes()
    return [field_head(field_number, len(body)), body] if body else []
