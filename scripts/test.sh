#!/usr/bin/env bash
# Usage: scripts/test.sh [CTEST ARGS...]
#
# Runs the whole denormd test suite on a fresh machine: installs the Debian
# packages, builds, starts a private PostgreSQL and a real Apache Kafka broker
# (own state directory and ports, so a running demo is not disturbed), runs
# every test with ctest, and stops the services again. The end-to-end test of the
# Debezium input (label `debezium`) starts its own application PostgreSQL and Kafka
# Connect worker (jars fetched once from Maven Central into .local/connect); leave it
# out with `scripts/test.sh -LE debezium`.
#
# Extra arguments go to ctest, e.g. `scripts/test.sh -R Postgres`.
#
# Environment:
#   DENORMD_TEST_STATE_DIR  services' state (default <repo>/.local/test)
#   DENORMD_TEST_PG_PORT    PostgreSQL port (default 15433)
#   DENORMD_TEST_KAFKA_PORT Kafka port (default 19192; controller +1)
#   DENORMD_TEST_APP_PG_PORT    the Debezium test's application PostgreSQL (default 15436)
#   DENORMD_TEST_CONNECT_PORT   the Debezium test's Kafka Connect REST port (default 18084)
#   DENORMD_BUILD_DIR       build directory (default <repo>/build)
#   DENORMD_TEST_JOBS       tests run at once (default 2)
set -euo pipefail

REPO_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO_DIR"
BUILD_DIR="${DENORMD_BUILD_DIR:-$REPO_DIR/build}"
export DENORMD_STATE_DIR="${DENORMD_TEST_STATE_DIR:-$REPO_DIR/.local/test}"
export DENORMD_PG_PORT="${DENORMD_TEST_PG_PORT:-15433}"
export DENORMD_KAFKA_PORT="${DENORMD_TEST_KAFKA_PORT:-19192}"
JOBS="${DENORMD_TEST_JOBS:-2}"

step() { echo "==> $*" >&2; }

step "installing packages (skipped when present)"
bash scripts/install-deps.sh

step "building in $BUILD_DIR"
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DDENORMD_WERROR=ON >/dev/null
cmake --build "$BUILD_DIR" -j 2

stop_services() {
  bash scripts/kafka.sh stop >/dev/null 2>&1 || true
  bash scripts/postgres.sh stop >/dev/null 2>&1 || true
}
trap stop_services EXIT

step "starting PostgreSQL on 127.0.0.1:$DENORMD_PG_PORT and Kafka on 127.0.0.1:$DENORMD_KAFKA_PORT"
DENORMD_TEST_POSTGRES="$(bash scripts/postgres.sh start)"
DENORMD_TEST_KAFKA="$(bash scripts/kafka.sh start)"
export DENORMD_TEST_POSTGRES DENORMD_TEST_KAFKA
export DENORMD_TEST_APP_PG_PORT="${DENORMD_TEST_APP_PG_PORT:-15436}"
export DENORMD_TEST_CONNECT_PORT="${DENORMD_TEST_CONNECT_PORT:-18084}"
export DENORMD_KAFKA_SCRIPT="$REPO_DIR/scripts/kafka.sh"

step "running the tests"
ctest --test-dir "$BUILD_DIR" --output-on-failure -j "$JOBS" "$@"
