#!/usr/bin/env bash
# Entrypoint of the postgres:15 stand-in (see the Dockerfile for the interface).
set -Eeuo pipefail

# `docker run image -c fsync=off`: options for the server.
if [[ "${1:0:1}" == - ]]; then set -- postgres "$@"; fi

POSTGRES_USER="${POSTGRES_USER:-postgres}"
POSTGRES_DB="${POSTGRES_DB:-$POSTGRES_USER}"
POSTGRES_HOST_AUTH_METHOD="${POSTGRES_HOST_AUTH_METHOD:-scram-sha-256}"

init_cluster() {
  if [[ -z "${POSTGRES_PASSWORD:-}" && "$POSTGRES_HOST_AUTH_METHOD" != trust ]]; then
    echo "error: database is uninitialized and POSTGRES_PASSWORD is not set" >&2
    echo "       (set it, or POSTGRES_HOST_AUTH_METHOD=trust to allow connections without one)" >&2
    exit 1
  fi
  echo "initializing the database cluster in $PGDATA"
  # shellcheck disable=SC2086
  initdb --username="$POSTGRES_USER" --pwfile=<(printf '%s\n' "${POSTGRES_PASSWORD:-}") \
    --auth-local=trust --auth-host="$POSTGRES_HOST_AUTH_METHOD" ${POSTGRES_INITDB_ARGS:-} -D "$PGDATA"
  printf '\nhost all all all %s\n' "$POSTGRES_HOST_AUTH_METHOD" >>"$PGDATA/pg_hba.conf"

  # A server on the socket only, for the database and the init scripts.
  pg_ctl -D "$PGDATA" -o "-c listen_addresses='' -p 5432" -w start
  local -a psql=(psql -X -v ON_ERROR_STOP=1 --username "$POSTGRES_USER" --no-password)
  if [[ "$POSTGRES_DB" != postgres ]]; then
    "${psql[@]}" --dbname postgres --set db="$POSTGRES_DB" <<<'CREATE DATABASE :"db";'
  fi
  local f
  for f in /docker-entrypoint-initdb.d/*; do
    case "$f" in
      *.sh) echo "running $f"; . "$f" ;;
      *.sql) echo "running $f"; "${psql[@]}" --dbname "$POSTGRES_DB" -f "$f" ;;
      *.sql.gz) echo "running $f"; gunzip -c "$f" | "${psql[@]}" --dbname "$POSTGRES_DB" ;;
      *) [[ -e "$f" ]] && echo "ignoring $f" ;;
    esac
  done
  pg_ctl -D "$PGDATA" -m fast -w stop
  echo "PostgreSQL init process complete; ready for start up."
}

if [[ "$1" == postgres ]]; then
  if [[ "$(id -u)" == 0 ]]; then
    # As root: own the data and socket directories, then run as postgres.
    mkdir -p "$PGDATA" /var/run/postgresql
    chown -R postgres:postgres "$PGDATA" /var/run/postgresql
    chmod 700 "$PGDATA"
    exec setpriv --reuid=postgres --regid=postgres --init-groups "${BASH_SOURCE[0]}" "$@"
  fi
  if [[ ! -s "$PGDATA/PG_VERSION" ]]; then
    init_cluster
  else
    echo "PostgreSQL database directory appears to contain a database; skipping initialization"
  fi
fi
exec "$@"
