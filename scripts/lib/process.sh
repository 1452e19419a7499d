# What the service scripts (kafka.sh, connect.sh) share: waiting for a line
# of their logs, and stopping the process they started. Sourced, not run. The sourcing script defines log, running_pid
# (prints the service's pid; fails when it is not running), PID_FILE and
# STOP_TIMEOUT (seconds).

# Prints the service's pid; when it is not running, says so, removes a stale
# PID_FILE and fails.
service_pid() {
  if running_pid; then return 0; fi
  log "not running"
  rm -f "$PID_FILE"
  return 1
}

# stop_process WHAT: SIGTERM to the service ("broker", "Kafka Connect"), then
# SIGKILL when it still runs after STOP_TIMEOUT seconds; waits until it is
# gone and removes PID_FILE. Succeeds when it was not running.
stop_process() {
  local what="$1" pid
  pid="$(service_pid)" || return 0
  log "stopping $what (pid $pid)"
  kill -TERM "$pid" 2>/dev/null || true
  local deadline=$((SECONDS + STOP_TIMEOUT))
  while kill -0 "$pid" 2>/dev/null && ((SECONDS < deadline)); do sleep 0.2; done
  if kill -0 "$pid" 2>/dev/null; then
    log "still running after $STOP_TIMEOUT s; sending SIGKILL"
    kill -KILL "$pid" 2>/dev/null || true
    while kill -0 "$pid" 2>/dev/null; do sleep 0.1; done
  fi
  rm -f "$PID_FILE"
  log "stopped"
}

# kill_process WHAT: kill -9 of the service (a crash, for tests); waits until
# it is gone and removes PID_FILE. Succeeds when it was not running.
kill_process() {
  local what="$1" pid
  pid="$(service_pid)" || return 0
  log "kill -9 $what (pid $pid)"
  kill -KILL "$pid" 2>/dev/null || true
  while kill -0 "$pid" 2>/dev/null; do sleep 0.05; done
  rm -f "$PID_FILE"
}

# log_grew_line FILE OFFSET TEXT: whether FILE holds TEXT past byte OFFSET.
# Not `tail | grep -q`: under pipefail, grep quits at its match, tail then
# dies of SIGPIPE once more than a pipe's worth follows, and the check fails
# on every later try (a broker with many partitions logs megabytes after
# "Kafka Server started").
log_grew_line() { grep -q -- "$3" < <(tail -c +"$(($2 + 1))" "$1" 2>/dev/null); }

# logged_since FILE OFFSET_VAR TEXT: whether TEXT was logged to FILE since
# byte $OFFSET_VAR (FILE's size when the wait began). The services' logs roll
# at 50 MB (kafka/log4j2.properties, connect/log4j2.properties), and a broker
# with many partitions writes that much while it starts: when FILE is
# shorter than the offset it rolled, TEXT may be in FILE.1 past the offset,
# and FILE is read from its start from then on (the variable is set to 0).
logged_since() {
  # Locals named apart from any caller's variable: printf -v sets the
  # caller's, which a local of the same name would hide.
  local logged_file="$1" logged_from="${!2}" logged_size logged_found=""
  logged_size="$(stat -c %s "$logged_file" 2>/dev/null || echo 0)"
  if ((logged_size < logged_from)); then
    log_grew_line "$logged_file.1" "$logged_from" "$3" && logged_found=1
    logged_from=0
    printf -v "$2" '%s' 0
  fi
  [[ -n "$logged_found" ]] || log_grew_line "$logged_file" "$logged_from" "$3"
}
