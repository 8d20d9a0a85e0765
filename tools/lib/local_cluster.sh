# A throwaway local cluster, for the scripts that need one (the quick start,
# the benchmarks, the GPU check). Source this file, then:
#
#   start_local_cluster BIN STATE LOG [cohortctl up flags...]
#
# starts `BIN/cohortctl up` with its state in the directory STATE and its
# output in LOG, and waits (60 s at most) until no task is starting or dead.
# It is this cluster alone: TF_CONFIG and COHORT_COORDINATOR are unset, and
# XDG_STATE_HOME is STATE, so later cohortctl commands reach it. At exit the
# cluster is stopped (by its pid) and STATE removed: this sets the EXIT trap,
# replacing any the caller set before. On failure it prints LOG to stderr
# and returns 1.

local_cluster_pid=""
local_cluster_state=""

stop_local_cluster() {
  if [ -n "$local_cluster_pid" ]; then
    kill -TERM "$local_cluster_pid" 2>/dev/null || true
    wait "$local_cluster_pid" 2>/dev/null || true
    local_cluster_pid=""
  fi
  if [ -n "$local_cluster_state" ]; then
    rm -rf "$local_cluster_state"
    local_cluster_state=""
  fi
}

start_local_cluster() {
  local bin="$1" log="$3"
  local_cluster_state="$2"
  shift 3
  unset TF_CONFIG COHORT_COORDINATOR
  export XDG_STATE_HOME="$local_cluster_state"
  "$bin/cohortctl" up "$@" >"$log" 2>&1 &
  local_cluster_pid=$!
  trap stop_local_cluster EXIT
  local status_text
  for _ in $(seq 1 300); do
    # Captured first: under pipefail, grep -q leaving early would fail the
    # pipeline with the writer's SIGPIPE.
    if status_text=$("$bin/cohortctl" status 2>/dev/null) &&
       ! grep -qE 'STARTING|RESTARTING|DEAD' <<<"$status_text"; then
      return 0
    fi
    if ! kill -0 "$local_cluster_pid" 2>/dev/null; then
      echo "the local cluster stopped while starting; its log:" >&2
      cat "$log" >&2
      return 1
    fi
    sleep 0.2
  done
  echo "the local cluster did not come up within 60 s; its log:" >&2
  cat "$log" >&2
  return 1
}
