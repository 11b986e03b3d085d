"""Message framing between the parent and its measurement workers.

One pickled object per message, preceded by its length as an 8-byte big-endian integer. Kept
apart from ``_worker`` so the parent never imports the worker's ``__main__`` module.
"""

from __future__ import annotations

import pickle
import struct
from typing import IO, Any

HEADER = struct.Struct(">Q")


def encode_message(obj: Any) -> bytes:
    data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    return HEADER.pack(len(data)) + data


def decode_from(buffer: bytearray) -> tuple[bool, Any]:
    """Pop one complete message off the front of ``buffer``; ``(False, None)`` if incomplete."""
    if len(buffer) < HEADER.size:
        return False, None
    (size,) = HEADER.unpack_from(buffer)
    end = HEADER.size + size
    if len(buffer) < end:
        return False, None
    obj = pickle.loads(bytes(buffer[HEADER.size : end]))
    del buffer[:end]
    return True, obj


def read_message(stream: IO[bytes]) -> Any:
    """Blocking read of one message; ``None`` at end of input."""
    header = stream.read(HEADER.size)
    if len(header) < HEADER.size:
        return None
    (size,) = HEADER.unpack(header)
    data = stream.read(size)
    if len(data) < size:
        return None
    return pickle.loads(data)


def write_message(stream: IO[bytes], obj: Any) -> None:
    stream.write(encode_message(obj))
    stream.flush()
