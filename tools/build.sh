#!/usr/bin/env bash
# Configures and builds Cohort into build/ (CUDA and NCCL support: AUTO, found
# under /usr/local/cuda). Extra arguments go to cmake's configure step, e.g.
# tools/build.sh -DCOHORT_WITH_CUDA=OFF. COHORT_BUILD_TARGET builds the
# targets it lists (space-separated) instead of all, e.g.
# COHORT_BUILD_TARGET=cohort-runtime (what a deployment runs).
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir="${COHORT_BUILD_DIR:-build}"
cmake -S . -B "$build_dir" -G Ninja "$@"
# shellcheck disable=SC2086  # a list of targets
cmake --build "$build_dir" ${COHORT_BUILD_TARGET:+--target $COHORT_BUILD_TARGET}
