#!/usr/bin/env bash
# Usage: scripts/containers.sh COMMAND [ARGS]
#
# The project's Dockerfile and docker-compose.yml, run without a Docker engine:
# Debian's podman (with runc) builds and runs the images, Debian's podman-compose
# reads the compose file. No registry is needed: the Debian base image is made
# with debootstrap, and the images only Docker Hub has (apache/kafka, postgres)
# are replaced by stand-ins built here from the same software (Kafka's jars from
# Maven Central, PostgreSQL from Debian) through the override file
# tests/containers/compose.standins.yml.
#
# Commands:
#   setup             install podman buildah debootstrap runc podman-compose (apt, only
#                     the missing ones), write the private containers.conf, make the
#                     base image
#   base-image        make the base image once (debootstrap --variant=minbase bookworm,
#                     cached as a tarball) and tag it docker.io/library/debian:bookworm
#                     and :bookworm-slim, so that FROM debian:bookworm builds unchanged
#   build [IMAGE...]  build images: denormd (the Dockerfile, through podman-compose build),
#                     kafka and postgres (the stand-ins); default: all three
#   up [--wait]       setup, build the missing images, create the containers with podman-compose
#                     and start them in depends_on order, waiting for each condition
#                     (service_healthy, service_completed_successfully) first;
#                     --wait: also wait until denormd itself is healthy
#   publish           the demo producer (profile demo): `run --rm producer`, after its
#                     dependencies' conditions hold
#   down              stop (30 s grace) and remove the containers, network and volumes
#   compose ARGS...   podman-compose -p PROJECT -f docker-compose.yml -f the override ARGS
#   podman ARGS...    podman with the private containers.conf
#   name SERVICE      print the container name of a service of the stack
#   env               print the `export CONTAINERS_CONF=...` line for an interactive shell
#   test [NAME...]    run tests/containers/NAME_test.sh (default: every one)
#
# Environment:
#   DENORMD_STATE_DIR            state root (default <repo>/.local); this script's state is
#                                in its containers/ folder (containers.conf, logs)
#   DENORMD_CONTAINERS_CACHE     the base image tarball (default <repo>/.local/containers,
#                                shared by every state dir, like the Kafka jars)
#   DENORMD_COMPOSE_PROJECT      compose project name (default denormd)
#   DENORMD_COMPOSE_WAIT         seconds to wait for one depends_on condition (default 300)
#   DENORMD_DEBIAN_MIRROR        debootstrap mirror (default: the host's apt source for
#                                bookworm, else http://deb.debian.org/debian)
#
# Why the ordered start: Debian bookworm's podman-compose (1.0.3) reads depends_on but
# ignores its conditions and the profiles key, and podman runs healthchecks from
# systemd timers, which this machine (no systemd) does not have. So `up` creates the
# containers with podman-compose (everything else in the file is podman-compose's
# translation) and starts them itself, running each healthcheck the file defines with
# `podman healthcheck run` until it passes.
#
# Images live in podman's ordinary storage (/var/lib/containers as root). Reset:
# scripts/containers.sh down; podman rmi the images; rm -rf .local/containers.
set -euo pipefail

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO_DIR="$(cd "$SCRIPT_DIR/.." && pwd)"
# Relative to the caller's directory, whichever directory a command runs in later.
STATE_DIR="$(realpath -m -- "${DENORMD_STATE_DIR:-$REPO_DIR/.local}")"
CONT_DIR="$STATE_DIR/containers"
CACHE_DIR="${DENORMD_CONTAINERS_CACHE:-$REPO_DIR/.local/containers}"
export CONTAINERS_CONF="$CONT_DIR/containers.conf"
# Keep HEALTHCHECK: the OCI image format (podman's default) has no place for it.
export BUILDAH_FORMAT=docker
PROJECT="${DENORMD_COMPOSE_PROJECT:-denormd}"
WAIT="${DENORMD_COMPOSE_WAIT:-300}"
COMPOSE_FILES=(-f "$REPO_DIR/docker-compose.yml" -f "$REPO_DIR/tests/containers/compose.standins.yml")
BASE_IMAGE=docker.io/library/debian:bookworm
BASE_TAR="$CACHE_DIR/debian-bookworm-minbase.tar"
KAFKA_IMAGE=localhost/denormd-standin-kafka:4.1
POSTGRES_IMAGE=localhost/denormd-standin-postgres:15
PACKAGES=(podman buildah debootstrap runc podman-compose)
# podman-compose's own interpreter (it needs python3-yaml); not a pyenv python on PATH.
PY=/usr/bin/python3

log() { echo "containers.sh: $*" >&2; }
die() { log "error: $*"; exit 1; }
usage() { sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed -e '$d' -e 's/^# \{0,1\}//' >&2; }

compose() { podman-compose -p "$PROJECT" "${COMPOSE_FILES[@]}" "$@"; }

# --- setup ------------------------------------------------------------------

installed() { [[ "$(dpkg-query -W -f='${db:Status-Abbrev}' "$1" 2>/dev/null)" == "ii"* ]]; }

install_packages() {
  local -a missing=()
  local p
  for p in "${PACKAGES[@]}"; do installed "$p" || missing+=("$p"); done
  if [[ ${#missing[@]} -eq 0 ]]; then
    log "podman, buildah, debootstrap, runc, podman-compose already installed"
    return 0
  fi
  local -a sudo=()
  if [[ $EUID -ne 0 ]]; then
    command -v sudo >/dev/null 2>&1 || die "not root and no sudo; run as root"
    sudo=(sudo)
  fi
  log "apt-get install ${missing[*]}"
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get -o Acquire::Retries=3 update -q >&2
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get -o Acquire::Retries=3 -o Dpkg::Use-Pty=0 \
    install -y -q "${missing[@]}" >&2
  for p in "${missing[@]}"; do installed "$p" || die "$p still not installed"; done
}

write_conf() {
  mkdir -p "$CONT_DIR"
  local conf='# Written by scripts/containers.sh; used through CONTAINERS_CONF, /etc is left alone.
# runc: the default crun fails here ("cgroups in hybrid mode not supported").
# No default ulimits: podman'"'"'s would fail ("setrlimit RLIMIT_NOFILE: Operation not permitted").
[containers]
default_ulimits = []

[engine]
runtime = "runc"'
  if [[ ! -f "$CONTAINERS_CONF" || "$(cat "$CONTAINERS_CONF")" != "$conf" ]]; then
    printf '%s\n' "$conf" >"$CONTAINERS_CONF"
    log "wrote $CONTAINERS_CONF"
  fi
}

debian_mirror() {
  if [[ -n "${DENORMD_DEBIAN_MIRROR:-}" ]]; then echo "$DENORMD_DEBIAN_MIRROR"; return; fi
  local uri
  uri="$(grep -hs '^URIs:' /etc/apt/sources.list.d/*.sources | awk '{print $2}' \
    | grep -v -- '-security' | head -n 1 || true)"
  [[ -z "$uri" ]] && uri="$(grep -hs '^deb .* bookworm ' /etc/apt/sources.list | awk '{print $2}' | head -n 1 || true)"
  echo "${uri:-http://deb.debian.org/debian}"
}

make_base_tar() {
  command -v debootstrap >/dev/null || die "debootstrap missing; run: scripts/containers.sh setup"
  local mirror; mirror="$(debian_mirror)"
  local tmp="$CACHE_DIR/rootfs.tmp.$$" dlog="$CACHE_DIR/debootstrap.log"
  mkdir -p "$CACHE_DIR"
  rm -rf "$tmp"
  log "debootstrap --variant=minbase bookworm from $mirror (about a minute; log $dlog)"
  if ! debootstrap --variant=minbase bookworm "$tmp" "$mirror" >"$dlog" 2>&1; then
    tail -n 20 "$dlog" >&2
    rm -rf "$tmp"
    die "debootstrap failed; see $dlog"
  fi
  # Like Docker's debian images: the release, its updates and security in one
  # deb822 file, no downloaded package lists or .debs in the image.
  rm -f "$tmp/etc/apt/sources.list"
  cat >"$tmp/etc/apt/sources.list.d/debian.sources" <<EOF
Types: deb
URIs: $mirror
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: ${mirror%/debian}/debian-security
Suites: bookworm-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
  rm -rf "$tmp"/var/cache/apt/archives/*.deb "$tmp"/var/lib/apt/lists/* "$tmp"/var/log/*.log
  tar --numeric-owner -C "$tmp" -cf "$BASE_TAR.tmp" .
  mv "$BASE_TAR.tmp" "$BASE_TAR"
  rm -rf "$tmp"
  log "cached the base root file system in $BASE_TAR ($(du -h "$BASE_TAR" | cut -f1))"
}

cmd_base_image() {
  if podman image exists "$BASE_IMAGE"; then
    log "base image $BASE_IMAGE present"
  else
    [[ -f "$BASE_TAR" ]] || make_base_tar
    log "importing $BASE_TAR as $BASE_IMAGE"
    podman import --change 'CMD ["bash"]' "$BASE_TAR" "$BASE_IMAGE" >"$CONT_DIR/import.log" 2>&1 \
      || { cat "$CONT_DIR/import.log" >&2; die "podman import failed"; }
  fi
  podman image exists "$BASE_IMAGE-slim" || podman tag "$BASE_IMAGE" "$BASE_IMAGE-slim"
}

cmd_setup() {
  install_packages
  write_conf
  cmd_base_image
}

# --- images -----------------------------------------------------------------

build_standin_kafka() {
  # The broker and tools jars of scripts/kafka/pom.xml, fetched the way the suite's
  # own broker gets them (Maven Central, shared local repository), are the context.
  bash "$SCRIPT_DIR/kafka.sh" fetch
  local lib="${DENORMD_KAFKA_LIB_DIR:-$REPO_DIR/.local/kafka/lib}"
  local ctx="$CONT_DIR/kafka-context"
  rm -rf "$ctx"
  mkdir -p "$ctx"
  cp -a "$REPO_DIR/deploy/standins/kafka/." "$ctx/"
  cp -a "$lib" "$ctx/libs"
  log "building $KAFKA_IMAGE (log $CONT_DIR/build-kafka.log)"
  podman build --pull=never -t "$KAFKA_IMAGE" "$ctx" >"$CONT_DIR/build-kafka.log" 2>&1 \
    || { tail -n 30 "$CONT_DIR/build-kafka.log" >&2; die "building $KAFKA_IMAGE failed"; }
  rm -rf "$ctx"
}

build_standin_postgres() {
  log "building $POSTGRES_IMAGE (log $CONT_DIR/build-postgres.log)"
  podman build --pull=never -t "$POSTGRES_IMAGE" "$REPO_DIR/deploy/standins/postgres" \
    >"$CONT_DIR/build-postgres.log" 2>&1 \
    || { tail -n 30 "$CONT_DIR/build-postgres.log" >&2; die "building $POSTGRES_IMAGE failed"; }
}

build_denormd() {
  # As `docker compose build denormd` would: the service's build: section, the
  # repository's Dockerfile as it is. podman's layer cache makes a rebuild of
  # unchanged sources quick.
  log "building denormd from the Dockerfile (podman-compose build; log $CONT_DIR/build-denormd.log)"
  (cd "$REPO_DIR" && compose build denormd) >"$CONT_DIR/build-denormd.log" 2>&1 \
    || { tail -n 40 "$CONT_DIR/build-denormd.log" >&2; die "building denormd failed"; }
  podman image exists denormd:latest || die "the build made no denormd:latest; see $CONT_DIR/build-denormd.log"
}

cmd_build() {
  local -a what=("$@")
  [[ ${#what[@]} -eq 0 ]] && what=(postgres kafka denormd)
  cmd_setup
  local w start
  for w in "${what[@]}"; do
    start=$SECONDS
    case "$w" in
      denormd) build_denormd ;;
      kafka) build_standin_kafka ;;
      postgres) build_standin_postgres ;;
      *) die "unknown image $w (denormd, kafka, postgres)" ;;
    esac
    log "$w image ready in $((SECONDS - start)) s"
  done
}

# --- the stack ----------------------------------------------------------------

# Prints the requested services (default: those without profiles) and their
# dependencies in start order, one per line: SERVICE DEP:CONDITION...
start_order() {
  "$PY" - "$@" "${COMPOSE_FILES[@]}" <<'EOF'
import sys, yaml
args = sys.argv[1:]
files = [args[i + 1] for i, a in enumerate(args) if a == "-f"]
wanted = [a for i, a in enumerate(args) if a != "-f" and (i == 0 or args[i - 1] != "-f")]

def merge(a, b):
    if isinstance(a, dict) and isinstance(b, dict):
        out = dict(a)
        for k, v in b.items():
            out[k] = merge(a[k], v) if k in a else v
        return out
    return b

doc = {}
for f in files:
    with open(f) as fh:
        doc = merge(doc, yaml.safe_load(fh) or {})
services = doc.get("services") or {}

def deps(name):
    d = services[name].get("depends_on") or {}
    if isinstance(d, list):
        return [(x, "service_started") for x in d]
    return [(k, (v or {}).get("condition", "service_started")) for k, v in d.items()]

if not wanted:
    wanted = [n for n, s in services.items() if not s.get("profiles")]
order, seen = [], set()
def visit(name, path=()):
    if name not in services:
        sys.exit("no service %s in the compose files" % name)
    if name in path:
        sys.exit("dependency cycle through %s" % name)
    if name in seen:
        return
    for dep, _ in deps(name):
        visit(dep, path + (name,))
    seen.add(name)
    order.append(name)
for name in wanted:
    visit(name)
for name in order:
    print(" ".join([name] + ["%s:%s" % d for d in deps(name)]))
EOF
}

container_of() {
  podman ps -a --filter "label=io.podman.compose.project=$PROJECT" \
    --filter "label=com.docker.compose.service=$1" --format '{{.Names}}' | grep -v '_tmp' | head -n 1
}

cmd_name() {
  local c; c="$(container_of "$1")"
  [[ -n "$c" ]] || die "no container for service $1 in project $PROJECT"
  echo "$c"
}

show_logs() {
  log "last lines of $1's log:"
  podman logs --tail 30 "$1" >&2 2>&1 || true
}

wait_healthy() { # CONTAINER
  local c="$1" deadline=$((SECONDS + WAIT)) state out
  while :; do
    state="$(podman inspect -f '{{.State.Status}}' "$c" 2>/dev/null || echo missing)"
    if [[ "$state" == exited || "$state" == missing ]]; then
      show_logs "$c"; die "$c is $state while waiting for it to be healthy"
    fi
    if [[ "$state" == running ]] && out="$(podman healthcheck run "$c" 2>&1)"; then
      return 0
    fi
    if ((SECONDS >= deadline)); then
      show_logs "$c"; die "$c not healthy after $WAIT s (last check: ${out:-none})"
    fi
    sleep 2
  done
}

# Conditions already met during this command (a healthy kafka need not be asked
# again for each service that depends on it).
declare -A MET=()

wait_condition() { # SERVICE CONDITION
  [[ -n "${MET[$1:$2]:-}" ]] && return 0
  local c; c="$(container_of "$1")"
  [[ -n "$c" ]] || die "no container for service $1"
  local start=$SECONDS
  case "$2" in
    service_started) ;;
    service_healthy)
      wait_healthy "$c"
      log "$1 healthy ($((SECONDS - start)) s)" ;;
    service_completed_successfully)
      local code
      code="$(timeout "$WAIT" podman wait "$c" 2>/dev/null | tail -n 1)" || true
      [[ "$code" == 0 ]] || { show_logs "$c"; die "$1 did not complete successfully (exit ${code:-timeout})"; }
      log "$1 completed successfully ($((SECONDS - start)) s)" ;;
    *) die "unknown depends_on condition $2 for $1" ;;
  esac
  MET[$1:$2]=1
}

cmd_up() {
  local wait_self=""
  [[ "${1:-}" == "--wait" ]] && { wait_self=1; shift; }
  cmd_setup
  podman image exists "$KAFKA_IMAGE" || build_standin_kafka
  podman image exists "$POSTGRES_IMAGE" || build_standin_postgres
  podman image exists denormd:latest || build_denormd
  local order; order="$(start_order)"
  local -a services
  mapfile -t services < <(awk '{print $1}' <<<"$order")
  if [[ -n "$(podman ps -a -q --filter "label=io.podman.compose.project=$PROJECT")" ]]; then
    log "project $PROJECT has containers already: starting them as they are (down first to recreate)"
  fi
  log "creating ${services[*]} (project $PROJECT; log $CONT_DIR/compose-up.log)"
  (cd "$REPO_DIR" && compose up --no-build --no-start "${services[@]}") >"$CONT_DIR/compose-up.log" 2>&1 \
    || { tail -n 30 "$CONT_DIR/compose-up.log" >&2; die "podman-compose up --no-start failed"; }
  local line name rest dep c
  # fd 3: podman must not eat the list from stdin.
  while read -r -u 3 line; do
    read -r name rest <<<"$line"
    for dep in $rest; do wait_condition "${dep%%:*}" "${dep#*:}" </dev/null; done
    c="$(container_of "$name")"
    [[ -n "$c" ]] || die "podman-compose created no container for $name; see $CONT_DIR/compose-up.log"
    log "starting $name ($c)"
    # podman complains on stderr that it cannot schedule the healthcheck with
    # systemd; the checks run from wait_healthy instead.
    podman start "$c" </dev/null >"$CONT_DIR/start-$name.log" 2>&1 \
      || { cat "$CONT_DIR/start-$name.log" >&2; die "podman start $c failed"; }
  done 3<<<"$order"
  if [[ -n "$wait_self" ]]; then
    local start=$SECONDS
    c="$(container_of denormd)"
    wait_healthy "$c"
    log "denormd healthy ($((SECONDS - start)) s)"
  fi
}

cmd_publish() {
  local line dep
  line="$(start_order producer | tail -n 1)"
  for dep in ${line#producer}; do wait_condition "${dep%%:*}" "${dep#*:}"; done
  log "publishing the demo events (run --rm producer)"
  (cd "$REPO_DIR" && compose run --rm -T --no-deps producer) </dev/null >"$CONT_DIR/publish.log" 2>&1 \
    || { tail -n 30 "$CONT_DIR/publish.log" >&2; die "the producer failed"; }
}

cmd_down() {
  log "down: stopping and removing project $PROJECT with its volumes"
  # podman-compose 1.0.3's down -v removes the named volumes only; docker compose
  # also removes the anonymous ones (the images' VOLUMEs): note them first.
  local -a anonymous=()
  local c v
  for c in $(podman ps -a --filter "label=io.podman.compose.project=$PROJECT" --format '{{.Names}}'); do
    for v in $(podman inspect -f '{{range .Mounts}}{{if eq .Type "volume"}}{{.Name}} {{end}}{{end}}' "$c"); do
      [[ "$v" =~ ^[0-9a-f]{64}$ ]] && anonymous+=("$v")
    done
  done
  (cd "$REPO_DIR" && compose down -t 30 -v) >"$CONT_DIR/compose-down.log" 2>&1 \
    || { tail -n 30 "$CONT_DIR/compose-down.log" >&2; die "podman-compose down failed"; }
  for v in "${anonymous[@]}"; do podman volume rm -f "$v" >/dev/null 2>&1 || true; done
  # podman-compose 1.0.3 leaves the project's network behind.
  if podman network exists "${PROJECT}_default" 2>/dev/null; then
    podman network rm "${PROJECT}_default" >/dev/null
  fi
}

cmd_test() {
  local -a tests=()
  if [[ $# -eq 0 ]]; then
    tests=("$REPO_DIR"/tests/containers/*_test.sh)
  else
    local t; for t in "$@"; do tests+=("$REPO_DIR/tests/containers/${t%_test.sh}_test.sh"); done
  fi
  local t failed=0
  for t in "${tests[@]}"; do
    log "running ${t#"$REPO_DIR"/}"
    bash "$t" || failed=1
  done
  return $failed
}

case "${1:-}" in
  setup) cmd_setup ;;
  base-image) install_packages; write_conf; cmd_base_image ;;
  build) shift; cmd_build "$@" ;;
  up) shift; cmd_up "$@" ;;
  publish) write_conf; cmd_publish ;;
  down) write_conf; cmd_down ;;
  compose) shift; write_conf; cd "$REPO_DIR"; compose "$@" ;;
  podman) shift; write_conf; exec podman "$@" ;;
  name) shift; write_conf; cmd_name "$@" ;;
  env) write_conf; echo "export CONTAINERS_CONF=$CONTAINERS_CONF BUILDAH_FORMAT=docker" ;;
  test) shift; cmd_test "$@" ;;
  -h|--help|help) usage ;;
  *) usage; exit 2 ;;
esac
