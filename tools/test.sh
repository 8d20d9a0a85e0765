#!/usr/bin/env bash
# Installs what is missing, builds, and runs every test (unit, integration,
# e2e). Each test has its own timeout; GPU tests skip without a GPU.
set -euo pipefail
cd "$(dirname "$0")/.."
tools/setup.sh
tools/build.sh
ctest --test-dir "${COHORT_BUILD_DIR:-build}" --output-on-failure --timeout 300 "$@"
