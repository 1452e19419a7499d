#!/usr/bin/env python3
"""Turns ConsoleConsumer output into JSON Lines, one object per record.

Used by `scripts/connect.sh capture`. Input on stdin: one record a line, as printed
by `scripts/kafka.sh consume TOPIC MAX --property print.partition=true
--property print.offset=true --property null.literal='<null>'`, i.e.
"Partition:P<TAB>Offset:O<TAB>KEY<TAB>VALUE". Output on stdout:
{"topic": T, "partition": P, "offset": O, "key": <JSON or null>, "value": <JSON or null>}
with the key and value parsed (JsonConverter writes JSON; JSON escapes tabs and
newlines, so neither holds a raw one). A null key or value (a tombstone) is null.
Usage: records-to-jsonl.py TOPIC < consumer-output
"""
import json
import sys

NULL = "<null>"


def parse(text):
    return None if text == NULL else json.loads(text)


def main():
    topic = sys.argv[1]
    for n, line in enumerate(sys.stdin, 1):
        line = line.rstrip("\n")
        if not line:
            continue
        parts = line.split("\t", 3)
        if len(parts) != 4 or not parts[0].startswith("Partition:") or not parts[1].startswith("Offset:"):
            sys.exit(f"records-to-jsonl.py: line {n}: not Partition:P<TAB>Offset:O<TAB>KEY<TAB>VALUE: {line[:200]}")
        record = {
            "topic": topic,
            "partition": int(parts[0][len("Partition:"):]),
            "offset": int(parts[1][len("Offset:"):]),
            "key": parse(parts[2]),
            "value": parse(parts[3]),
        }
        print(json.dumps(record, separators=(",", ":"), ensure_ascii=False))


if __name__ == "__main__":
    main()
