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
    return varint(field_number << 3 | 2) + varint(len(body)) + body
