#!/usr/bin/env bash
# Job throughput on this machine: brings up a local cluster (two agents of
# 2 CPU devices, one ps) in a scratch state dir, writes the MLP's data, runs
# cohort-job-bench against it, and stops the cluster. Extra arguments go to
# cohort-job-bench (e.g. --format=csv).
set -euo pipefail
cd "$(dirname "$0")/.."
bin=build/bin
state="$(mktemp -d "${TMPDIR:-/tmp}/cohort-job-bench.XXXXXX")"
export XDG_STATE_HOME="$state"
"$bin/cohortctl" up --cpu_devices=2 >"$state/up.log" 2>&1 &
up_pid=$!
trap 'kill -TERM "$up_pid" 2>/dev/null || true; wait "$up_pid" 2>/dev/null || true; rm -rf "$state"' EXIT

address=""
for _ in $(seq 1 100); do
  if json="$("$bin/cohortctl" status --json 2>/dev/null)" &&
     ! grep -qE '"(STARTING|RESTARTING|DEAD)"' <<<"$json"; then
    address="$(sed -n 's/.*"coordinator_address": *"\([^"]*\)".*/\1/p' <<<"$json" | head -1)"
    break
  fi
  sleep 0.2
done
if [ -z "$address" ]; then
  echo "job_bench: the cluster did not come up; its log:" >&2
  cat "$state/up.log" >&2
  exit 1
fi
"$bin/cohort-example-mlp-data" --out="$state/spirals" --files=4 >/dev/null
"$bin/cohort-job-bench" --coordinator="$address" --mlp_data="$state/spirals" "$@"
