#!/usr/bin/env bash
# Builds the libFuzzer targets (tests/fuzz/) with clang-14, AddressSanitizer
# and UndefinedBehaviorSanitizer into build-fuzz/, replays every saved
# regression input, then fuzzes each target from its seed corpus. New inputs
# go to build-fuzz/corpus/<target>/, logs to build-fuzz/logs/. Prints one
# line per target: executions, seconds, and the verdict.
#
#   tools/fuzz.sh                          # every target, 60 s each
#   RUNS=1000000 tools/fuzz.sh             # every target, 10^6 executions
#   RUNS=1000000 TIME=600 tools/fuzz.sh    # 10^6 executions or 10 minutes
#   TIME=600 TARGETS="job_spec_fuzzer" tools/fuzz.sh
#   SMOKE=1 tools/fuzz.sh                  # CI: regressions, seeds, 2000 mutations
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
build=${FUZZ_BUILD_DIR:-$root/build-fuzz}
all="cluster_spec_fuzzer record_reader_fuzzer checkpoint_reader_fuzzer
     snapshot_reader_fuzzer job_spec_fuzzer coordinator_requests_fuzzer
     store_requests_fuzzer ps_requests_fuzzer peer_frame_fuzzer"
targets=${TARGETS:-$all}

command -v clang++-14 >/dev/null || {
  echo "fuzz: clang++-14 is missing (apt-get install clang-14 libfuzzer-14-dev)" >&2
  exit 2
}
if [ ! -f "$build/build.ninja" ]; then
  CC=clang-14 CXX=clang++-14 cmake -S . -B "$build" -G Ninja \
    -DCOHORT_FUZZ=ON -DCOHORT_WITH_CUDA=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
fi
# shellcheck disable=SC2086
cmake --build "$build" --target $targets

# RUNS and TIME together: whichever comes first.
if [ -n "${SMOKE:-}" ]; then
  limit=(-runs=2000)
else
  limit=()
  [ -n "${RUNS:-}" ] && limit+=(-runs="$RUNS")
  [ -n "${TIME:-}" ] || [ -z "${RUNS:-}" ] && limit+=(-max_total_time="${TIME:-60}")
fi
mkdir -p "$build/logs"
# The targets that read files write each input to a scratch file under
# $TMPDIR; this run's own directory keeps /tmp clean.
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
export TMPDIR=$scratch
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
failed=0
printf '%-30s %12s %8s  %s\n' target executions seconds verdict
for target in $targets; do
  bin=$build/fuzz/$target
  log=$build/logs/$target.log
  seeds=$root/tests/fuzz/corpus/$target
  regressions=$root/tests/fuzz/regressions/$target
  work=$build/corpus/$target
  mkdir -p "$work"
  verdict=ok
  # Every input that once crashed a target must pass now.
  if [ -d "$regressions" ] && [ -n "$(ls -A "$regressions")" ]; then
    if ! "$bin" "$regressions"/* >"$log.regressions" 2>&1; then
      verdict="REGRESSION (see $log.regressions)"
    fi
  fi
  start=$(date +%s)
  if [ "$verdict" = ok ] &&
     ! "$bin" "${limit[@]}" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
         -artifact_prefix="$build/logs/$target-" "$work" "$seeds" >"$log" 2>&1; then
    verdict="CRASH (see $log)"
  fi
  seconds=$(( $(date +%s) - start ))
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  printf '%-30s %12s %8s  %s\n' "$target" "${runs:-?}" "$seconds" "$verdict"
  [ "$verdict" = ok ] || failed=1
done
exit $failed
