#!/usr/bin/env bash
# Usage: scripts/postgres.sh COMMAND [ARGS]
#
# A private PostgreSQL cluster for development and tests, separate from any system
# cluster: its own data directory, port, socket directory and log.
#
# Commands:
#   start        initdb on first use, start the server (pg_ctl -w), create database
#                $DENORMD_PG_DB if missing, print its URL on stdout (no-op if running)
#   stop         stop the server, fast mode (no-op if not running)
#   status       exit 0 and say so if running, exit 3 if not
#   url          print postgresql://postgres@127.0.0.1:PORT/DB
#   psql [ARGS]  run psql against the database with the remaining arguments
#   promote      a standby (DENORMD_PG_STANDBY_OF): end recovery, become a primary
#
# Environment:
#   DENORMD_STATE_DIR  state root (default: <repo>/.local)
#   DENORMD_PG_PORT    TCP port on 127.0.0.1 (default 15432)
#   DENORMD_PG_DB      database created by start (default denorm)
#   DENORMD_PG_FSYNC   on|off (default on; see below)
#   DENORMD_PG_WAL_LEVEL  replica|logical (default: the server's, replica); logical for a
#                      database that Debezium reads (logical decoding), applied at start
#   DENORMD_PG_STANDBY_OF  a port on 127.0.0.1: on first start the cluster is not
#                      initdb'd but copied from that primary (pg_basebackup -R) and runs as
#                      its streaming standby (hot_standby, read-only) until `promote`
#   DENORMD_PG_WAL_DIR  keep the write-ahead log in this directory instead of the data
#                      directory's pg_wal (initdb --waldir, pg_basebackup --waldir), used on
#                      first start only: the data can then sit on a small filesystem of its
#                      own (scripts/cluster.sh's disk-full fault) while the WAL does not
#   DENORMD_PG_BINDIR  PostgreSQL binaries (default: newest /usr/lib/postgresql/*/bin,
#                      or the cluster's own major once it exists)
#
# State: $DENORMD_STATE_DIR/postgres (data directory), .../postgres-socket (Unix
# socket), .../postgres.log (server log).
# Reset: scripts/postgres.sh stop && rm -rf "$DENORMD_STATE_DIR"/postgres*
#
# Notes:
# - initdb and postgres refuse to run as root. Run as root (as CI does), this script
#   runs them as the OS user `postgres` (from Debian's postgresql packages), which owns
#   the data directory. That user must be able to traverse every directory above the
#   state dir: where one lacks the "x" bit for others (e.g. a repo under /root or a
#   umask of 077), start adds o+x to it (search only, no read) and says so on stderr.
#   Run as an ordinary user, everything runs as that user.
# - Listens on 127.0.0.1 only; trust authentication for local sockets, 127.0.0.1/32
#   and ::1/128 only. Database superuser: postgres.
# - fsync stays on by default so timings resemble a real deployment; set
#   DENORMD_PG_FSYNC=off for faster, crash-unsafe throwaway runs (applied at start).
set -euo pipefail

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO_DIR="$(cd "$SCRIPT_DIR/.." && pwd)"
# Relative to the caller's directory, whichever directory a command runs in later.
STATE_DIR="$(realpath -m -- "${DENORMD_STATE_DIR:-$REPO_DIR/.local}")"
PGDATA_DIR="$STATE_DIR/postgres"
SOCK_DIR="$STATE_DIR/postgres-socket"
PG_LOG="$STATE_DIR/postgres.log"
PORT="${DENORMD_PG_PORT:-15432}"
DB="${DENORMD_PG_DB:-denorm}"
FSYNC="${DENORMD_PG_FSYNC:-on}"
WAL_LEVEL="${DENORMD_PG_WAL_LEVEL:-}"
WAL_DIR="${DENORMD_PG_WAL_DIR:-}"
URL="postgresql://postgres@127.0.0.1:$PORT/$DB"
PG_USER=postgres   # OS user that runs the server when this script runs as root

log() { echo "postgres.sh: $*" >&2; }
die() { log "error: $*"; exit 1; }
usage() { sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed -e '$d' -e 's/^# \{0,1\}//' >&2; }

[[ "$PORT" =~ ^[0-9]+$ ]] || die "DENORMD_PG_PORT must be a number, got '$PORT'"
[[ "$FSYNC" == on || "$FSYNC" == off ]] || die "DENORMD_PG_FSYNC must be on or off, got '$FSYNC'"
[[ -z "$WAL_LEVEL" || "$WAL_LEVEL" == replica || "$WAL_LEVEL" == logical ]] \
  || die "DENORMD_PG_WAL_LEVEL must be replica or logical, got '$WAL_LEVEL'"

# A Unix socket path is limited to 107 bytes; a deep state dir falls back to /tmp.
if (( ${#SOCK_DIR} + 16 > 107 )); then
  SOCK_DIR="${TMPDIR:-/tmp}/denormd-pg-$PORT-$(printf '%s' "$STATE_DIR" | sha1sum | cut -c1-8)"
fi

bindir() {
  if [[ -n "${DENORMD_PG_BINDIR:-}" ]]; then echo "$DENORMD_PG_BINDIR"; return; fi
  if [[ -f "$PGDATA_DIR/PG_VERSION" ]]; then
    local major; major="$(cat "$PGDATA_DIR/PG_VERSION")"
    [[ -x "/usr/lib/postgresql/$major/bin/postgres" ]] \
      || die "the cluster in $PGDATA_DIR is PostgreSQL $major, whose binaries are not installed; reset it (rm -rf $PGDATA_DIR)"
    echo "/usr/lib/postgresql/$major/bin"; return
  fi
  local newest
  newest="$(find /usr/lib/postgresql -mindepth 2 -maxdepth 2 -name bin -type d 2>/dev/null | sort -V | tail -n 1)"
  [[ -n "$newest" && -x "$newest/postgres" ]] || die "no PostgreSQL server under /usr/lib/postgresql; run scripts/install-deps.sh"
  echo "$newest"
}

# initdb's and pg_basebackup's option for DENORMD_PG_WAL_DIR (emptied first:
# a WAL directory is only ever that of the cluster being made), or nothing.
waldir_option() {
  [[ -n "$WAL_DIR" ]] || return 0
  rm -rf "$WAL_DIR"
  mkdir -p "$WAL_DIR"
  if [[ $EUID -eq 0 ]]; then chown "$PG_USER:" "$WAL_DIR"; fi
  chmod 700 "$WAL_DIR"
  ensure_traversable "$WAL_DIR"
  echo "--waldir=$WAL_DIR"
}

# Runs a command as the server's OS user (postgres when we are root).
as_pg() {
  if [[ $EUID -eq 0 ]]; then
    (cd / && runuser -u "$PG_USER" -- "$@")
  else
    "$@"
  fi
}

psql_bin() {
  local b; b="$(bindir)"
  if [[ -x "$b/psql" ]]; then echo "$b/psql"; else command -v psql || die "psql not found; run scripts/install-deps.sh"; fi
}

is_running() {
  [[ -f "$PGDATA_DIR/PG_VERSION" ]] || return 1
  as_pg "$(bindir)/pg_ctl" -D "$PGDATA_DIR" status >/dev/null 2>&1
}

port_open() { timeout 2 bash -c "exec 3<>/dev/tcp/127.0.0.1/$1" 2>/dev/null; }

# Make sure the server's OS user can reach DIR: add o+x where it is missing.
ensure_traversable() {
  local dir="$1"
  [[ $EUID -eq 0 ]] || return 0
  runuser -u "$PG_USER" -- test -x "$dir" 2>/dev/null && return 0
  local path="" part
  local -a parts
  IFS=/ read -r -a parts <<<"${dir#/}"
  for part in "${parts[@]}"; do
    path="$path/$part"
    if ! runuser -u "$PG_USER" -- test -x "$path" 2>/dev/null; then
      log "chmod o+x $path (so that user $PG_USER can reach $dir)"
      chmod o+x "$path"
    fi
  done
}

write_config() {
  local conf
  conf="# Written by scripts/postgres.sh at every start; edits are overwritten.
listen_addresses = '127.0.0.1'
port = $PORT
unix_socket_directories = '$SOCK_DIR'
max_connections = 100
shared_buffers = 256MB
fsync = $FSYNC
logging_collector = off
log_line_prefix = '%m [%p] %q%u@%d '
log_timezone = 'UTC'
timezone = 'UTC'"
  if [[ -n "$WAL_LEVEL" ]]; then
    # max_replication_slots and max_wal_senders keep their defaults (10 each).
    conf+="
wal_level = $WAL_LEVEL"
  fi
  as_pg tee "$PGDATA_DIR/denormd.conf" >/dev/null <<<"$conf"
  as_pg tee "$PGDATA_DIR/pg_hba.conf" >/dev/null <<'EOF'
# Written by scripts/postgres.sh: trust, on this machine only.
# TYPE  DATABASE     USER  ADDRESS        METHOD
local   all          all                  trust
host    all          all   127.0.0.1/32   trust
host    all          all   ::1/128        trust
local   replication  all                  trust
host    replication  all   127.0.0.1/32   trust
host    replication  all   ::1/128        trust
EOF
  if ! grep -q "^include_if_exists = 'denormd.conf'" "$PGDATA_DIR/postgresql.conf"; then
    as_pg tee -a "$PGDATA_DIR/postgresql.conf" >/dev/null <<<"include_if_exists = 'denormd.conf'"
  fi
}

init_cluster() {
  local bin="$1" tmp="$PGDATA_DIR.init.tmp" locale=C
  locale -a 2>/dev/null | grep -qix 'c.utf-\?8' && locale=C.UTF-8
  log "initdb $PGDATA_DIR (PostgreSQL $("$bin/postgres" --version | awk '{print $3}'), locale $locale, as user $(as_pg id -un))"
  rm -rf "$tmp"
  mkdir -p "$tmp"
  if [[ $EUID -eq 0 ]]; then chown "$PG_USER:" "$tmp"; fi
  chmod 700 "$tmp"
  local waldir; waldir="$(waldir_option)"
  # shellcheck disable=SC2086
  if ! as_pg "$bin/initdb" -D "$tmp" -U postgres --auth=trust --encoding=UTF8 $waldir \
      --locale="$locale" >"$STATE_DIR/postgres-initdb.log" 2>&1; then
    cat "$STATE_DIR/postgres-initdb.log" >&2
    rm -rf "$tmp"
    die "initdb failed"
  fi
  mv "$tmp" "$PGDATA_DIR"   # only a complete cluster ever appears under the final name
}

# A standby's data directory: a base backup of the primary on 127.0.0.1:PORT, with
# standby.signal and its primary_conninfo (-R), streaming from its own slot.
copy_primary() {
  local bin="$1" primary="$2" tmp="$PGDATA_DIR.init.tmp"
  [[ "$primary" =~ ^[0-9]+$ ]] || die "DENORMD_PG_STANDBY_OF must be a port, got '$primary'"
  log "pg_basebackup from the primary on 127.0.0.1:$primary into $PGDATA_DIR (a standby)"
  rm -rf "$tmp"
  mkdir -p "$tmp"
  if [[ $EUID -eq 0 ]]; then chown "$PG_USER:" "$tmp"; fi
  chmod 700 "$tmp"
  local slot="standby_$PORT" waldir
  waldir="$(waldir_option)"
  # -c fast: an immediate checkpoint (a spread one waits up to minutes on an idle primary).
  if ! as_pg "$bin/pg_basebackup" -h 127.0.0.1 -p "$primary" -U postgres -D "$tmp" -R -X stream -c fast \
      -C -S "$slot" $waldir >"$STATE_DIR/postgres-basebackup.log" 2>&1; then
    cat "$STATE_DIR/postgres-basebackup.log" >&2
    rm -rf "$tmp"
    die "pg_basebackup from 127.0.0.1:$primary failed"
  fi
  mv "$tmp" "$PGDATA_DIR"
}

cmd_promote() {
  is_running || die "not running"
  [[ -f "$PGDATA_DIR/standby.signal" ]] || { log "not a standby: nothing to promote"; return 0; }
  log "promoting the standby on 127.0.0.1:$PORT"
  as_pg "$(bindir)/pg_ctl" -D "$PGDATA_DIR" -w -t 60 promote >/dev/null
  log "promoted: 127.0.0.1:$PORT is a primary"
}

cmd_start() {
  if is_running; then
    log "already running on 127.0.0.1:$PORT (data $PGDATA_DIR)"
    ensure_db
    check_wal_level
    echo "$URL"
    return 0
  fi
  if [[ $EUID -eq 0 ]]; then
    id -u "$PG_USER" >/dev/null 2>&1 || die "OS user $PG_USER missing; run scripts/install-deps.sh"
  fi
  local bin; bin="$(bindir)"
  mkdir -p "$STATE_DIR" "$SOCK_DIR"
  touch "$PG_LOG"
  if [[ $EUID -eq 0 ]]; then chown "$PG_USER:" "$SOCK_DIR" "$PG_LOG"; fi
  ensure_traversable "$STATE_DIR"
  ensure_traversable "$SOCK_DIR"
  if [[ ! -f "$PGDATA_DIR/PG_VERSION" ]]; then
    if [[ -e "$PGDATA_DIR" ]] && [[ -n "$(ls -A "$PGDATA_DIR")" ]]; then
      die "$PGDATA_DIR exists but holds no cluster; remove it and retry"
    fi
    rmdir "$PGDATA_DIR" 2>/dev/null || true
    if [[ -n "${DENORMD_PG_STANDBY_OF:-}" ]]; then
      copy_primary "$bin" "$DENORMD_PG_STANDBY_OF"
    else
      init_cluster "$bin"
    fi
  fi
  if port_open "$PORT"; then
    die "port $PORT on 127.0.0.1 is in use by another process; set DENORMD_PG_PORT"
  fi
  write_config
  log "starting PostgreSQL on 127.0.0.1:$PORT (log $PG_LOG)"
  if ! as_pg "$bin/pg_ctl" -D "$PGDATA_DIR" -l "$PG_LOG" -w -t 60 start >/dev/null; then
    tail -n 30 "$PG_LOG" >&2
    if tail -n 30 "$PG_LOG" | grep -q 'Address already in use'; then
      # Not listening a moment ago, yet taken: most often the local end of an
      # outgoing connection (a port inside net.ipv4.ip_local_port_range).
      die "pg_ctl start failed: port $PORT is held by another socket (an outgoing connection's local port?); set DENORMD_PG_PORT to a port below $(cut -f1 /proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || echo 32768)"
    fi
    die "pg_ctl start failed"
  fi
  ensure_db
  echo "$URL"
}

# A running server keeps the wal_level it started with: say so when another is asked for.
check_wal_level() {
  [[ -n "$WAL_LEVEL" ]] || return 0
  local current
  current="$("$(psql_bin)" -X -q -h 127.0.0.1 -p "$PORT" -U postgres -d postgres -tAc 'show wal_level')"
  [[ "$current" == "$WAL_LEVEL" ]] \
    || log "warning: running with wal_level=$current, not $WAL_LEVEL; restart to apply (stop, then start)"
}

ensure_db() {
  local psql; psql="$(psql_bin)"
  local -a conn=(-X -q -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$PORT" -U postgres)
  if [[ "$("$psql" "${conn[@]}" -d postgres -tAc "SELECT 1 FROM pg_database WHERE datname = '$DB'")" != 1 ]]; then
    log "creating database $DB"
    "$psql" "${conn[@]}" -d postgres -c "CREATE DATABASE \"$DB\"" >/dev/null
  fi
}

cmd_stop() {
  if ! is_running; then
    log "not running"
    return 0
  fi
  log "stopping PostgreSQL (fast)"
  as_pg "$(bindir)/pg_ctl" -D "$PGDATA_DIR" -m fast -w -t 60 stop >/dev/null
  log "stopped"
}

cmd_status() {
  if is_running; then
    log "running on 127.0.0.1:$PORT (data $PGDATA_DIR): $URL"
    return 0
  fi
  log "not running"
  return 3
}

case "${1:-}" in
  start) cmd_start ;;
  stop) cmd_stop ;;
  status) cmd_status ;;
  url) echo "$URL" ;;
  promote) cmd_promote ;;
  psql) shift; p="$(psql_bin)"; exec "$p" "$URL" "$@" ;;
  -h|--help|help) usage ;;
  *) usage; exit 2 ;;
esac
