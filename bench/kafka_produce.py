#!/usr/bin/env python3
"""A minimal Kafka producer in pure Python (stdlib only), for bench/run.py's freshness test.

Why not `denormd publish -`: publish reads its input 10,000 lines at a time, so events
fed through stdin at a fixed rate would reach Kafka in bursts of 10,000, and freshness
would measure the bursts. This producer sends every few milliseconds what is due at
the requested rate.

What it speaks: one broker connection (a single-node cluster: it is the leader of
every partition), Produce v7 with record batches v2 (magic 2, CRC-32C, no
compression, no idempotence), acks=1. Records are keyed type:id and partitioned by
CRC32(key) % partitions, like librdkafka's consistent partitioner (denormd publish), or,
with partitioner="murmur2", like the Java client's default partitioner (the Kafka Streams
peer's topic), so one entity's events stay in order. Each record's timestamp (CreateTime) is the moment it became
due, so producer-side lag counts against freshness, never in its favour.

Usage (stand-alone):
  bench/kafka_produce.py --brokers 127.0.0.1:19092 --topic T --partitions 4 \
      --rate 2000 --seconds 30 FILE
"""

import argparse
import json
import socket
import struct
import sys
import time
import zlib


def _crc32c_table():
    table = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        table.append(c)
    return table


_CRC32C = _crc32c_table()


def crc32c(data):
    c = 0xFFFFFFFF
    t = _CRC32C
    for b in data:
        c = t[(c ^ b) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF


def _varint(n):
    n = (n << 1) ^ (n >> 63)  # zigzag
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def murmur2(data):
    """Kafka's Utils.murmur2 (the Java client's default partitioner), as a signed 32-bit int."""
    m, mask = 0x5BD1E995, 0xFFFFFFFF
    length = len(data)
    h = (0x9747B28C ^ length) & mask
    for i in range(0, length - length % 4, 4):
        k = data[i] | (data[i + 1] << 8) | (data[i + 2] << 16) | (data[i + 3] << 24)
        k = (k * m) & mask
        k ^= k >> 24
        k = (k * m) & mask
        h = (h * m) & mask
        h ^= k
    tail, rest = length & ~3, length % 4
    if rest == 3:
        h ^= data[tail + 2] << 16
    if rest >= 2:
        h ^= data[tail + 1] << 8
    if rest >= 1:
        h ^= data[tail]
        h = (h * m) & mask
    h ^= h >> 13
    h = (h * m) & mask
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


def _string(s):
    b = s.encode()
    return struct.pack(">h", len(b)) + b


def record_batch(records):
    """records: list of (timestamp_ms, key bytes, value bytes). Returns a v2 record batch."""
    base_ts = records[0][0]
    max_ts = max(r[0] for r in records)
    body = bytearray()
    for delta, (ts, key, value) in enumerate(records):
        rec = (b"\x00" + _varint(ts - base_ts) + _varint(delta) + _varint(len(key)) + key +
               _varint(len(value)) + value + _varint(0))
        body += _varint(len(rec)) + rec
    after_crc = (struct.pack(">hiqqqhii", 0, len(records) - 1, base_ts, max_ts, -1, -1, -1,
                             len(records)) + bytes(body))
    crc = crc32c(after_crc)
    after_length = struct.pack(">ibI", -1, 2, crc) + after_crc
    return struct.pack(">qi", 0, len(after_length)) + after_length


class Producer:
    """Produce v7 requests on one connection, one request at a time."""

    def __init__(self, brokers, topic, partitions, client_id="denormd-bench", partitioner="crc32"):
        host, port = brokers.split(",")[0].rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=30)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.topic = topic
        self.partitions = partitions
        self.client_id = client_id
        self.correlation = 0
        self.sent = 0
        if partitioner not in ("crc32", "murmur2"):
            raise ValueError(f"unknown partitioner {partitioner}")
        self.partitioner = partitioner

    def partition_of(self, key):
        if self.partitioner == "murmur2":
            return (murmur2(key) & 0x7FFFFFFF) % self.partitions
        return zlib.crc32(key) % self.partitions

    def _recv(self, n):
        buf = bytearray()
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                raise ConnectionError("the broker closed the connection")
            buf += chunk
        return bytes(buf)

    def send(self, records):
        """records: list of (timestamp_ms, key bytes, value bytes); blocks until acked."""
        if not records:
            return
        by_partition = {}
        for r in records:
            by_partition.setdefault(self.partition_of(r[1]), []).append(r)
        self.correlation += 1
        body = bytearray()
        body += struct.pack(">hhih", 0, 7, self.correlation, len(self.client_id))  # header v1
        body += self.client_id.encode()
        body += struct.pack(">hhi", -1, 1, 30000)  # transactional_id null, acks=1, timeout
        body += struct.pack(">i", 1) + _string(self.topic)
        body += struct.pack(">i", len(by_partition))
        for p, recs in sorted(by_partition.items()):
            batch = record_batch(recs)
            body += struct.pack(">ii", p, len(batch)) + batch
        self.sock.sendall(struct.pack(">i", len(body)) + bytes(body))
        size = struct.unpack(">i", self._recv(4))[0]
        resp = self._recv(size)
        # correlation_id, [topic: name, [partition: index, error_code, ...]]
        pos = 4
        (ntopics,) = struct.unpack_from(">i", resp, pos)
        pos += 4
        for _ in range(ntopics):
            (nlen,) = struct.unpack_from(">h", resp, pos)
            pos += 2 + nlen
            (nparts,) = struct.unpack_from(">i", resp, pos)
            pos += 4
            for _ in range(nparts):
                index, error = struct.unpack_from(">ih", resp, pos)
                pos += 4 + 2 + 8 + 8 + 8  # base_offset, log_append_time, log_start_offset
                # v7 has no per-partition record_errors (v8+)
                if error != 0:
                    raise RuntimeError(f"Kafka error code {error} producing to "
                                       f"{self.topic}[{index}]")
        self.sent += len(records)

    def close(self):
        self.sock.close()


def key_of(line):
    try:
        e = json.loads(line)
        return f"{e['type']}:{e['id']}".encode()
    except (ValueError, KeyError, TypeError):
        return b""


def produce_at_rate(producer, lines, rate, seconds, tick=0.005, stop=None):
    """Sends lines at `rate` per second for at most `seconds` (or until lines run out), each
    stamped with the moment it became due: what has become due in one request every `tick`
    seconds (as a producer gathers records for linger.ms, librdkafka's 5 ms by default), or,
    with tick 0, whenever a record becomes due (a request of a record or two: the broker's
    CPU then grows with the rate, on cores it may share with what is measured).

    Returns (sent, elapsed seconds, max lag seconds behind schedule)."""
    start = time.time()
    i = 0
    max_lag = 0.0
    n = len(lines)
    while i < n:
        now = time.time()
        elapsed = now - start
        if elapsed >= seconds or (stop is not None and stop()):
            break
        due = min(n, int(elapsed * rate) + 1)
        if due > i:
            batch = []
            for j in range(i, due):
                scheduled = start + j / rate
                batch.append((int(scheduled * 1000), key_of(lines[j]), lines[j]))
            max_lag = max(max_lag, now - (start + i / rate))
            producer.send(batch)
            i = due
        if tick > 0:
            time.sleep(max(0.0, now + tick - time.time()))
        else:
            time.sleep(max(0.0, start + i / rate - time.time()))
    return i, time.time() - start, max_lag


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--brokers", required=True)
    p.add_argument("--topic", required=True)
    p.add_argument("--partitions", type=int, required=True,
                   help="the topic's partition count (the topic must exist)")
    p.add_argument("--rate", type=float, required=True, help="events per second")
    p.add_argument("--seconds", type=float, default=1e9)
    p.add_argument("--partitioner", choices=["crc32", "murmur2"], default="crc32",
                   help="crc32: librdkafka's consistent partitioner (denormd publish); murmur2: "
                        "the Java client's default")
    p.add_argument("file", help="JSON Lines event log")
    args = p.parse_args()
    with open(args.file, "rb") as f:
        lines = [line.rstrip(b"\n") for line in f if line.strip()]
    producer = Producer(args.brokers, args.topic, args.partitions, partitioner=args.partitioner)
    sent, elapsed, lag = produce_at_rate(producer, lines, args.rate, args.seconds)
    producer.close()
    print(f"sent {sent} events in {elapsed:.1f} s ({sent / elapsed:.0f}/s); "
          f"max lag behind schedule {lag * 1000:.1f} ms", file=sys.stderr)


if __name__ == "__main__":
    main()
