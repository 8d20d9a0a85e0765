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

source tools/lib/local_cluster.sh
state="$(mktemp -d "${TMPDIR:-/tmp}/cohort-quickstart.XXXXXX")"
start_local_cluster build/bin "$state" "$state/up.log"
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
