#!/usr/bin/env bash
# All-reduce between test hosts (network namespaces on one machine, joined by
# a bridge: tests/testing/testhosts.sh), one rank per host, so that every
# byte crosses a network: Cohort's gRPC path, Gloo's TCP transport (the
# peers' gloo_allreduce, built here to bind its host's address instead of
# 127.0.0.1), and OpenMPI's TCP transport with the peers' tuning (mpirun
# starts its daemons on the hosts through an rsh agent that enters them).
# Prints the peers' RESULT lines (see ../shared/bench/peers) and
# writes them to $OUT/hosts.csv, with a FAILED line for each run that failed
# (and then exits 1). Needs root.
#
#   bench/hosts_bench.sh                       # 2 and 4 ranks
#   RANKS="2" SIZES="4096 1048576" bench/hosts_bench.sh
#   REPEATS=3 bench/hosts_bench.sh             # the systems alternated 3 times
#
# Repeats alternate the systems (Cohort, Gloo, OpenMPI, then again), so that
# a change in the machine's speed during the run falls on all of them.
set -euo pipefail
cd "$(dirname "$0")/.."

RANKS="${RANKS:-2 4}"
REPEATS="${REPEATS:-1}"
SIZES="${SIZES:-4096 1048576 16777216 67108864}"
PEERS="${PEERS:-$(cd .. && pwd)/shared/bench/peers}"
COHORT_BENCH="${COHORT_BENCH:-$PWD/build/bin/cohort-bench}"
OUT="${OUT:-$PWD/bench/results/hosts}"
hosts=tests/testing/testhosts.sh

[ "$(id -u)" -eq 0 ] || { echo "hosts_bench: needs root (test hosts)" >&2; exit 2; }
[ -x "$COHORT_BENCH" ] || { echo "hosts_bench: no $COHORT_BENCH; run tools/build.sh" >&2; exit 2; }
mkdir -p "$OUT"
scratch=$(mktemp -d -t cohort-hosts-bench.XXXXXX)
name="hb$(( $$ % 10000 ))"
store_pid=""
made_hosts=false  # only a set this run made is taken down
failures=0
cleanup() {
  [ -n "$store_pid" ] && kill "$store_pid" 2>/dev/null || true
  if $made_hosts; then "$hosts" down "$name" >/dev/null 2>&1 || true; fi
  rm -rf "$scratch"
}
trap cleanup EXIT

max=0
for n in $RANKS; do [ "$n" -gt "$max" ] && max=$n; done
"$hosts" up "$name" "$max"
made_hosts=true
bridge=$("$hosts" addr "$name" 0)
sizes_csv=$(echo "$SIZES" | tr ' ' ',')
: >"$OUT/hosts.csv"

# Runs "$@" as rank r of n on host r+1, for every r, and waits for all; rank
# 0's output goes to $scratch/rank0.out. Each rank is bounded in time.
# Fails when a rank did.
run_ranks() {
  local n=$1 r pids=()
  shift
  for r in $(seq 0 $((n - 1))); do
    local addr
    addr=$("$hosts" addr "$name" $((r + 1)))
    RANK=$r ADDR=$addr timeout 600 "$hosts" exec "$name" $((r + 1)) \
      env RANK="$r" ADDR="$addr" bash -c "$*" >"$scratch/rank$r.out" 2>"$scratch/rank$r.err" &
    pids+=($!)
  done
  local failed=0
  for pid in "${pids[@]}"; do wait "$pid" || failed=1; done
  if [ "$failed" -ne 0 ]; then
    echo "hosts_bench: a rank failed:" >&2
    cat "$scratch"/rank*.err >&2
    return 1
  fi
}

# Records a failed run as the peers' run_all.sh does, so that no median is
# silently taken over fewer runs.
record_failure() {  # label ranks
  echo "FAILED,$1,$2" | tee -a "$OUT/hosts.csv" >&2
  failures=$((failures + 1))
}

# --- Cohort: a store on the bridge, each rank's Peer server on its host.
"$COHORT_BENCH" store --listen="$bridge:0" >"$scratch/store.out" 2>&1 &
store_pid=$!
store=""
for _ in $(seq 1 100); do
  store=$(sed -n 's/.*store serving on //p' "$scratch/store.out" 2>/dev/null)
  [ -n "$store" ] && break
  sleep 0.05
done
if [ -z "$store" ]; then
  echo "hosts_bench: the store did not start:" >&2
  cat "$scratch/store.out" >&2
  exit 1
fi
run_cohort() {  # run_cohort N REPEAT
  echo "hosts_bench: cohort, $1 ranks on $1 hosts" >&2
  if ! run_ranks "$1" "'$COHORT_BENCH' allreduce --store=$store \
    --group=hosts$1-$2 --ranks=$1 --rank=\$RANK --listen=\$ADDR:0 \
    --sizes=$sizes_csv --format=csv --label=cohort-hosts"; then
    record_failure cohort-hosts "$1"  # and the others go on
  fi
  grep '^RESULT,' "$scratch/rank0.out" | tee -a "$OUT/hosts.csv" || true
}

# --- Gloo over TCP between the hosts, FileStore rendezvous in $scratch.
have_gloo=false
if [ -f "$PEERS/gloo_allreduce.cc" ] && [ -f /usr/include/gloo/config.h ]; then
  sed 's/attr.hostname = "127.0.0.1";/attr.hostname = std::getenv("GLOO_HOSTNAME");/' \
    "$PEERS/gloo_allreduce.cc" >"$scratch/gloo_hosts.cc"
  sed -i '1i #include <cstdlib>' "$scratch/gloo_hosts.cc"
  g++ -O2 -std=c++17 -o "$scratch/gloo_hosts" "$scratch/gloo_hosts.cc" -lgloo -pthread
  have_gloo=true
else
  echo "hosts_bench: Gloo not installed (run $PEERS/run_all.sh once as root)" >&2
fi
run_gloo() {  # run_gloo N REPEAT
  echo "hosts_bench: gloo, $1 ranks on $1 hosts" >&2
  local dir="$scratch/gloo$1-$2"
  mkdir -p "$dir"
  if ! run_ranks "$1" "GLOO_HOSTNAME=\$ADDR '$scratch/gloo_hosts' \$RANK $1 \
    '$dir' ring,ring_chunked,hd $SIZES"; then
    record_failure gloo-hosts "$1"
  fi
  grep '^RESULT,' "$scratch/rank0.out" | sed 's/^RESULT,gloo/RESULT,gloo-hosts/' |
    tee -a "$OUT/hosts.csv" || true
}

# --- OpenMPI over TCP between the hosts, as the peers' mpi-tcp+tuned.
have_mpi=false
if [ -f "$PEERS/mpi_allreduce.c" ] && command -v mpicc >/dev/null && command -v mpirun >/dev/null; then
  mpicc -O2 -o "$scratch/mpi_allreduce" "$PEERS/mpi_allreduce.c"
  # mpirun runs "agent HOST COMMAND..." to start its daemon on HOST, an
  # address 198.18.S.I of this set: run it on test host I.
  cat >"$scratch/rsh_agent" <<EOF
#!/bin/sh
host=\$1
shift
exec '$PWD/$hosts' exec '$name' "\${host##*.}" sh -c "\$*"
EOF
  chmod +x "$scratch/rsh_agent"
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
  have_mpi=true
else
  echo "hosts_bench: OpenMPI not installed (run $PEERS/run_all.sh once as root)" >&2
fi
run_mpi() {  # run_mpi N
  echo "hosts_bench: openmpi, $1 ranks on $1 hosts" >&2
  local subnet_cidr="${bridge%.*}.0/24" host_list
  host_list=$(for r in $(seq 1 "$1"); do "$hosts" addr "$name" "$r"; done | paste -sd,)
  # Yield when idle, as the peers' --oversubscribe makes it on loopback: the
  # hosts share the machine's cores.
  timeout 600 mpirun --bind-to none -np "$1" --host "$host_list" --mca mpi_yield_when_idle 1 \
    --mca plm_rsh_agent "$scratch/rsh_agent" --mca oob_tcp_if_include "$subnet_cidr" \
    --mca pml ob1 --mca btl tcp,self --mca btl_tcp_if_include "$subnet_cidr" \
    -x GLIBC_TUNABLES=glibc.malloc.mmap_threshold=1073741824:glibc.malloc.trim_threshold=4294967296 \
    "$scratch/mpi_allreduce" mpi-hosts-tcp+tuned $SIZES 2>"$scratch/mpi.err" |
    grep '^RESULT,' | tee -a "$OUT/hosts.csv" || {
      echo "hosts_bench: openmpi failed:" >&2
      cat "$scratch/mpi.err" >&2
      record_failure mpi-hosts-tcp+tuned "$1"
    }
}

for rep in $(seq 1 "$REPEATS"); do
  echo "hosts_bench: repeat $rep/$REPEATS" >&2
  for n in $RANKS; do run_cohort "$n" "$rep"; done
  if $have_gloo; then for n in $RANKS; do run_gloo "$n" "$rep"; done; fi
  if $have_mpi; then for n in $RANKS; do run_mpi "$n"; done; fi
done
if [ "$failures" -gt 0 ]; then
  echo "hosts_bench: $failures run(s) failed; see the FAILED lines" >&2
  exit 1
fi
