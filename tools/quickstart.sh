#!/usr/bin/env bash
# Installs what is missing, builds, brings up the default local cluster (one
# chief and one worker agent with 2 CPU devices each, one ps), and trains the
# Fashion-MNIST classifier on it under MultiWorkerMirrored (4 replicas),
# showing progress. Prints the test accuracy, then stops the cluster. Extra
# arguments go to `cohortctl submit`.
set -euo pipefail
cd "$(dirname "$0")/.."
tools/setup.sh
tools/build.sh

state="$(mktemp -d "${TMPDIR:-/tmp}/cohort-quickstart.XXXXXX")"
export XDG_STATE_HOME="$state"
# This cluster alone: not one that TF_CONFIG or COHORT_COORDINATOR names.
unset TF_CONFIG COHORT_COORDINATOR
build/bin/cohortctl up >"$state/up.log" 2>&1 &
up_pid=$!
cleanup() {
  kill -TERM "$up_pid" 2>/dev/null || true
  wait "$up_pid" 2>/dev/null || true
  rm -rf "$state"
}
trap cleanup EXIT

# Wait (bounded) for the cluster: `cohortctl up` writes the port, then the
# tasks register.
for _ in $(seq 1 100); do
  # Captured first: under pipefail, grep -q leaving early would fail the
  # pipeline with the writer's SIGPIPE.
  if status_text=$(build/bin/cohortctl status 2>/dev/null) &&
     ! grep -qE 'STARTING|RESTARTING|DEAD' <<<"$status_text"; then
    break
  fi
  if ! kill -0 "$up_pid" 2>/dev/null; then
    cat "$state/up.log" >&2
    exit 1
  fi
  sleep 0.2
done
build/bin/cohortctl status

build/bin/cohort-example-fmnist-data --out="$state/fmnist" --files=8
# 10,000 steps of 128 images: 21 epochs of the 60,000 training images; the
# accuracy shown is on the 10,000 test images, every 1000 steps.
build/bin/cohortctl submit --name=fmnist-quickstart \
  --library=build/lib/libcohort_example_fmnist.so \
  --init=fmnist_init --step=fmnist_step --dataset=fmnist_data \
  --strategy=multi_worker_mirrored --steps=10000 --global_batch=128 --seed=1 \
  --checkpoint_every=2000 \
  --config="{\"data_dir\": \"$state/fmnist\", \"eval_every\": 1000}" \
  --wait "$@"
# The cluster is new, so its one job is job 1.
accuracy="$(build/bin/cohortctl job 1 --json |
  sed -n 's/.*"accuracy": *\([0-9.]*\).*/\1/p' | head -1)"
echo "test accuracy on the 10,000 Fashion-MNIST test images: $accuracy"
