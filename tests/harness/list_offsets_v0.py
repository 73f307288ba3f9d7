"""A raw ListOffsets **v0** client: the legacy (mtime) lookup old consumers still ask for.

Kafka 4.x brokers refuse v0 (KIP-896); 3.x brokers answer it with
``UnifiedLog.legacyFetchOffsetsBefore``: up to ``max_num_offsets`` segment base offsets (plus the
log end offset) whose ``.log`` mtime is <= the target, newest first. No client library we have
sends v0 any more (librdkafka asks for v1+), so the request is built here byte by byte from the
protocol's published layout and sent over a plain socket to 127.0.0.1:

request  = int32 size, then
  header v1: int16 api_key (2 = ListOffsets), int16 api_version (0), int32 correlation_id,
             nullable string client_id (int16 length + UTF-8)
  body v0:   int32 replica_id (-1: an ordinary consumer, answers clamped to the high watermark),
             array topics (int32 count): string name, array partitions (int32 count):
                 int32 partition_index, int64 timestamp, int32 max_num_offsets
response = int32 size, then
  header v0: int32 correlation_id
  body v0:   array topics: string name, array partitions: int32 partition_index,
             int16 error_code, array old_style_offsets (int32 count, int64 each)
"""

from __future__ import annotations

import itertools
import socket
import struct
from dataclasses import dataclass

API_KEY_LIST_OFFSETS = 2
API_VERSION_V0 = 0
CONSUMER_REPLICA_ID = -1
"""replica_id of an ordinary consumer: the broker answers only as leader, clamped to the high watermark."""
DEBUGGING_REPLICA_ID = -2
"""replica_id of a debugging client: any replica answers, unclamped."""
LATEST_TIMESTAMP = -1
EARLIEST_TIMESTAMP = -2

_REQUEST_HEADER_V1 = struct.Struct(">hhi")   # api_key, api_version, correlation_id (client_id follows)
_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")
_INT64 = struct.Struct(">q")
_PARTITION_V0 = struct.Struct(">iqi")         # partition_index, timestamp, max_num_offsets
_MAX_RESPONSE_BYTES = 1 << 20
_correlation = itertools.count(1)


class ListOffsetsV0Error(RuntimeError):
    """The broker's answer could not be read, or did not match the request."""


@dataclass
class V0Answer:
    error_code: int
    offsets: list[int]
    """as the broker sent them (descending)."""


def _string(s: str) -> bytes:
    raw = s.encode()
    return _INT16.pack(len(raw)) + raw


def encode_request(topic: str, partition: int, timestamp_ms: int, max_num_offsets: int,
                   correlation_id: int, client_id: str = "kla-v0", replica_id: int = CONSUMER_REPLICA_ID) -> bytes:
    """One ListOffsets v0 request for one partition, size-prefixed."""
    body = (_REQUEST_HEADER_V1.pack(API_KEY_LIST_OFFSETS, API_VERSION_V0, correlation_id) + _string(client_id)
            + _INT32.pack(replica_id)
            + _INT32.pack(1) + _string(topic)
            + _INT32.pack(1) + _PARTITION_V0.pack(partition, timestamp_ms, max_num_offsets))
    return _INT32.pack(len(body)) + body


class _Cursor:
    def __init__(self, data: bytes):
        self.data, self.pos = data, 0

    def take(self, st: struct.Struct, field: str):
        if self.pos + st.size > len(self.data):
            raise ListOffsetsV0Error(f"response cut short at byte {self.pos} reading {field} "
                                     f"({len(self.data)} bytes in all)")
        (value,) = st.unpack_from(self.data, self.pos)
        self.pos += st.size
        return value

    def string(self, field: str) -> str:
        n = self.take(_INT16, f"{field} length")
        if n < 0 or self.pos + n > len(self.data):
            raise ListOffsetsV0Error(f"{field} length {n} at byte {self.pos - 2} runs past the response")
        raw = self.data[self.pos:self.pos + n]
        self.pos += n
        return raw.decode()

    def count(self, field: str, item_bytes: int) -> int:
        n = self.take(_INT32, f"{field} count")
        if n < 0 or self.pos + n * item_bytes > len(self.data):
            raise ListOffsetsV0Error(f"{field} count {n} at byte {self.pos - 4} does not fit the response")
        return n


def decode_response(payload: bytes, correlation_id: int, topic: str, partition: int) -> V0Answer:
    """The answer for (topic, partition) in one v0 response (without its size prefix)."""
    cur = _Cursor(payload)
    got = cur.take(_INT32, "correlation_id")
    if got != correlation_id:
        raise ListOffsetsV0Error(f"correlation id {got}, expected {correlation_id}")
    answer = None
    for _ in range(cur.count("topics", 2 + 4)):
        name = cur.string("topic name")
        for _ in range(cur.count("partitions", 4 + 2 + 4)):
            index = cur.take(_INT32, "partition_index")
            error = cur.take(_INT16, "error_code")
            offsets = [cur.take(_INT64, "offset") for _ in range(cur.count("old_style_offsets", 8))]
            if name == topic and index == partition:
                answer = V0Answer(error, offsets)
    if cur.pos != len(payload):
        raise ListOffsetsV0Error(f"{len(payload) - cur.pos} bytes left after the response body")
    if answer is None:
        raise ListOffsetsV0Error(f"no answer for {topic}-{partition} in the response")
    return answer


def _recv_exact(sock: socket.socket, n: int) -> bytes:
    chunks, left = [], n
    while left:
        chunk = sock.recv(min(left, 65536))
        if not chunk:
            raise ListOffsetsV0Error(f"connection closed with {left} of {n} bytes unread "
                                     "(a broker that no longer serves v0 closes the connection)")
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


class ListOffsetsV0Client:
    """One connection to one broker (127.0.0.1 only); ``ask`` sends one request and reads its answer."""

    def __init__(self, port: int, timeout_s: float = 15.0, client_id: str = "kla-v0"):
        self.port = port
        self.client_id = client_id
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout_s)

    def ask(self, topic: str, partition: int, timestamp_ms: int, max_num_offsets: int = 1,
            replica_id: int = CONSUMER_REPLICA_ID) -> V0Answer:
        cid = next(_correlation) & 0x7FFFFFFF
        self.sock.sendall(encode_request(topic, partition, timestamp_ms, max_num_offsets, cid,
                                         self.client_id, replica_id))
        size = _INT32.unpack(_recv_exact(self.sock, 4))[0]
        if not 4 <= size <= _MAX_RESPONSE_BYTES:
            raise ListOffsetsV0Error(f"response size {size} out of bounds [4, {_MAX_RESPONSE_BYTES}]")
        return decode_response(_recv_exact(self.sock, size), cid, topic, partition)

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> "ListOffsetsV0Client":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
