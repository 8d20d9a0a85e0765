#!/usr/bin/env bash
# Installs what is missing, builds, and brings up the default local cluster
# (one chief, one worker, one ps) in the foreground. Ctrl-C stops it.
set -euo pipefail
cd "$(dirname "$0")/.."
tools/setup.sh
tools/build.sh
exec build/bin/cohortctl up "$@"
