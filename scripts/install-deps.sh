#!/usr/bin/env bash
# Usage: scripts/install-deps.sh [--check]
#
# Installs the Debian (bookworm) packages needed to build and test denormd:
# the C++ toolchain and libraries, PostgreSQL (server + client, for
# scripts/postgres.sh), Maven and a Java runtime (for scripts/kafka.sh).
#
# When every package is already installed (checked with dpkg-query) it does nothing,
# without touching the network, so a second run is fast and works offline.
# Otherwise it runs `apt-get update` once and `apt-get install -y` (needs root, or sudo).
#
#   --check   only report what is missing; exit 1 if anything is
#
# Environment: DENORMD_APT_EXTRA="pkg1 pkg2"  extra packages to install as well.
set -euo pipefail

log() { echo "install-deps.sh: $*" >&2; }
die() { log "error: $*"; exit 1; }
usage() { sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed -e '$d' -e 's/^# \{0,1\}//' >&2; }

check_only=""
case "${1:-}" in
  "") ;;
  --check) check_only=1 ;;
  -h|--help) usage; exit 0 ;;
  *) usage; exit 2 ;;
esac

packages=(
  build-essential cmake ninja-build pkg-config
  libpqxx-dev librdkafka-dev rapidjson-dev libyaml-cpp-dev libgtest-dev googletest
  postgresql postgresql-client
  maven
  nftables   # scripts/cluster.sh's network partition (the production fault tests)
)
# A Java runtime only if there is none (the machine may bring its own JDK).
command -v java >/dev/null 2>&1 || packages+=(openjdk-17-jre-headless)
command -v python3 >/dev/null 2>&1 || packages+=(python3)
# shellcheck disable=SC2206
[[ -n "${DENORMD_APT_EXTRA:-}" ]] && packages+=($DENORMD_APT_EXTRA)

installed() { [[ "$(dpkg-query -W -f='${db:Status-Abbrev}' "$1" 2>/dev/null)" == "ii"* ]]; }

missing=()
for p in "${packages[@]}"; do
  installed "$p" || missing+=("$p")
done

if [[ ${#missing[@]} -eq 0 ]]; then
  log "all ${#packages[@]} packages already installed; nothing to do"
  exit 0
fi
log "missing: ${missing[*]}"
[[ -z "$check_only" ]] || exit 1

sudo=()
if [[ $EUID -ne 0 ]]; then
  command -v sudo >/dev/null 2>&1 || die "not root and no sudo; run as root"
  sudo=(sudo)
fi
export DEBIAN_FRONTEND=noninteractive
apt_opts=(-o Acquire::Retries=3 -o Dpkg::Use-Pty=0)

log "apt-get update"
"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get "${apt_opts[@]}" update -q >&2
log "apt-get install ${missing[*]}"
"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get "${apt_opts[@]}" install -y -q \
  -o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold "${missing[@]}" >&2

still=()
for p in "${missing[@]}"; do installed "$p" || still+=("$p"); done
[[ ${#still[@]} -eq 0 ]] || die "still not installed after apt-get: ${still[*]}"
command -v java >/dev/null 2>&1 || die "java still not on PATH"
log "done"
