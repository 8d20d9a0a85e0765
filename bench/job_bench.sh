#!/usr/bin/env bash
# Job throughput on this machine: brings up a local cluster (two agents of
# 2 CPU devices, one ps) in a scratch state dir, writes the MLP's data, runs
# cohort-job-bench against it, and stops the cluster. Extra arguments go to
# cohort-job-bench (e.g. --format=csv).
set -euo pipefail
cd "$(dirname "$0")/.."
bin=build/bin
source tools/lib/local_cluster.sh
state="$(mktemp -d "${TMPDIR:-/tmp}/cohort-job-bench.XXXXXX")"
start_local_cluster "$bin" "$state" "$state/up.log" --cpu_devices=2
address="$(sed -n 's/.*"coordinator_address": *"\([^"]*\)".*/\1/p' \
  <<<"$("$bin/cohortctl" status --json)" | head -1)"
"$bin/cohort-example-mlp-data" --out="$state/spirals" --files=4 >/dev/null
"$bin/cohort-job-bench" --coordinator="$address" --mlp_data="$state/spirals" "$@"
