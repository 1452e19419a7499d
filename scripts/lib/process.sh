# What the service scripts (kafka.sh, connect.sh) share: stopping the process
# they started. Sourced, not run. The sourcing script defines log, running_pid
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
