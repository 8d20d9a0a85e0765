#!/usr/bin/env bash
# Builds Cohort under sanitizers (CUDA off) and runs the whole test suite
# there. The daemons the e2e tests start are the sanitized binaries too; every
# process writes its reports under <build>/sanitizer-logs/, and any report
# fails the run, even from a process whose test passed.
#
#   tools/sanitize.sh address,undefined      # ASan + UBSan, into build-asan/
#   tools/sanitize.sh thread                 # TSan, into build-tsan/
#   tools/sanitize.sh thread -R Collective   # further arguments go to ctest
#
# TSan must see every lock. Debian's Abseil is not instrumented, and
# absl::Mutex (ours and gRPC's) lives in it, so the thread run first builds
# the same Abseil release from Debian's source package with -fsanitize=thread
# (into build-tsan/absl/, once; it needs a deb-src line for bookworm) and
# runs the tests against it. gRPC and protobuf stay uninstrumented: reports
# whose both stacks are inside them are suppressed (tools/tsan.supp).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
which=${1:-}
case "$which" in
  address,undefined) build=${COHORT_BUILD_DIR:-build-asan} ;;
  thread) build=${COHORT_BUILD_DIR:-build-tsan} ;;
  *)
    echo "usage: tools/sanitize.sh address,undefined|thread [ctest arguments]" >&2
    exit 2
    ;;
esac
shift
# Absolute from here on: the logs and the instrumented Abseil live under it.
case "$build" in /*) ;; *) build=$root/$build ;; esac

tools/setup.sh

# An instrumented Abseil with the system one's sonames, for LD_LIBRARY_PATH.
build_tsan_abseil() {
  local prefix=$1 src
  [ -f "$prefix/.done" ] && return 0
  mkdir -p "$prefix/src"
  src=$prefix/src/abseil
  if [ ! -d "$src" ]; then
    local version
    version=$(dpkg-query -W -f='${source:Version}' libabsl-dev)
    echo "sanitize: fetching Abseil $version's source (apt-get source)"
    # apt-get source unpacks with dpkg-source, from dpkg-dev.
    command -v dpkg-source >/dev/null || tools/setup.sh dpkg-dev
    (cd "$prefix/src" && apt-get source -qq "abseil=$version" >/dev/null) || {
      echo "sanitize: apt-get source abseil failed; it needs a deb-src line" \
           "for bookworm in /etc/apt/sources.list.d/ (then apt-get update)" >&2
      exit 2
    }
    mv "$(find "$prefix/src" -maxdepth 1 -type d -name 'abseil-*' | head -n 1)" "$src"
  fi
  if ! cmp -s "$src/absl/base/options.h" /usr/include/absl/base/options.h; then
    echo "sanitize: $src is not the installed Abseil (options.h differs)" >&2
    exit 2
  fi
  echo "sanitize: building Abseil with -fsanitize=thread into $prefix"
  cmake -S "$src" -B "$prefix/build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_CXX_STANDARD=17 -DBUILD_SHARED_LIBS=ON -DBUILD_TESTING=OFF \
    -DCMAKE_CXX_FLAGS="-fsanitize=thread -fno-omit-frame-pointer" \
    -DCMAKE_SHARED_LINKER_FLAGS="-fsanitize=thread" \
    -DCMAKE_INSTALL_PREFIX="$prefix" -DCMAKE_INSTALL_LIBDIR=lib >/dev/null
  cmake --build "$prefix/build"
  cmake --install "$prefix/build" >/dev/null
  touch "$prefix/.done"
}

COHORT_BUILD_DIR=$build tools/build.sh -DCOHORT_WITH_CUDA=OFF \
  -DCOHORT_WITH_NCCL=OFF -DCOHORT_SANITIZE="$which"

logs=$build/sanitizer-logs
# handle_segv=0 in both: a test that crashes a process on purpose (a step
# library's raise(SIGSEGV)) judges that crash itself; the sanitizers report
# races, memory errors, undefined behaviour and leaks.
rm -rf "$logs"
mkdir -p "$logs"
if [ "$which" = thread ]; then
  build_tsan_abseil "$build/absl"
  export LD_LIBRARY_PATH=$build/absl/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  export TSAN_OPTIONS="log_path=$logs/tsan:handle_segv=0:second_deadlock_stack=1:suppressions=$root/tools/tsan.supp"
else
  export ASAN_OPTIONS="log_path=$logs/asan:handle_segv=0:detect_leaks=1"
  export UBSAN_OPTIONS="log_path=$logs/ubsan:print_stacktrace=1:halt_on_error=1"
fi

# Sanitized processes are several times slower: the tests' own deadlines
# stay; ctest's default limit grows (tests that set a TIMEOUT keep theirs,
# and the heaviest collective tests can run past it under TSan).
status=0
ctest --test-dir "$build" --output-on-failure --timeout 1200 "$@" || status=$?

reports=$(find "$logs" -type f | wc -l)
if [ "$reports" -gt 0 ]; then
  echo "sanitize ($which): $reports report(s), first lines:"
  for f in $(find "$logs" -type f | sort | head -n 20); do
    echo "== $f"
    grep -m 3 -E 'ERROR|WARNING|runtime error|SUMMARY' "$f" || head -n 3 "$f"
  done
  status=1
else
  echo "sanitize ($which): no reports"
fi
exit "$status"
