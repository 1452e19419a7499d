#!/usr/bin/env bash
# scripts/lib/process.sh's logged_since, which kafka.sh start and connect.sh
# wait-streaming poll for their readiness line: a log that rolls (50 MB)
# after the line was written must not hide it. On 2026-11-29 the
# benchmark's broker, with 405 partitions, wrote "Kafka Server started" and
# then rolled its server.log; the wait read only the new file, gave up after
# 90 s and stopped a broker that was up.
#   tests/scripts/log_roll_test.sh REPO_DIR
set -euo pipefail
repo="$1"
# shellcheck source=../../scripts/lib/process.sh
source "$repo/scripts/lib/process.sh"
dir="$(mktemp -d)"
trap 'rm -rf "$dir"' EXIT
log="$dir/server.log"
failures=0
check() { # WHAT EXPECTED(0|1) ACTUAL
  if [[ "$2" != "$3" ]]; then echo "FAIL: $1 (expected $2, got $3)"; failures=$((failures + 1)); fi
}

# Before the wait: 1,000 bytes, one old readiness line.
{ echo "[old] Kafka Server started"; head -c 970 /dev/zero | tr '\0' x; echo; } >"$log"
offset="$(stat -c %s "$log")"
at=0; logged_since "$log" offset "Kafka Server started" || at=$?
check "an old line is not news" 1 "$at"
check "no roll: the offset stays" "$(stat -c %s "$log")" "$offset"

# The line is written, then the log rolls: the new file is shorter.
echo "[new] Kafka Server started" >>"$log"
mv "$log" "$log.1"
echo "[new] partitions loaded" >"$log"
at=0; logged_since "$log" offset "Kafka Server started" || at=$?
check "the line written before the roll is found in the rolled file" 0 "$at"
check "after a roll the file is read from its start" 0 "$offset"

# A roll before the line: found in the new file, from its start.
{ echo "[old2] Kafka Server started"; head -c 2000 /dev/zero | tr '\0' y; echo; } >"$log"
offset="$(stat -c %s "$log")"
mv "$log" "$log.1"
echo "[new2] Kafka Server started" >"$log"
at=0; logged_since "$log" offset "Kafka Server started" || at=$?
check "the line written after the roll is found" 0 "$at"

# A roll with no line on either side is not readiness.
{ head -c 3000 /dev/zero | tr '\0' z; echo; } >"$log"
offset="$(stat -c %s "$log")"
mv "$log" "$log.1"
echo "[new3] starting" >"$log"
at=0; logged_since "$log" offset "Kafka Server started" || at=$?
check "no line since the wait began, before or after the roll" 1 "$at"

if ((failures > 0)); then exit 1; fi
echo "log roll: all checks passed"
