#!/usr/bin/env bash
# The GPU checks, in two halves, for a GPU machine that has CUDA, NCCL and
# PyTorch but no gRPC packages and no network (the device tool's machine).
#
#   tools/gpu_check.sh pack   here: builds with CUDA, and packs the binaries,
#                             the GPU tests, the example libraries, the
#                             non-system shared libraries `ldd` names and the
#                             Fashion-MNIST files into gpu_bundle.tar.gz
#                             (at most 64 MiB)
#   tools/gpu_check.sh run    there, in the repository root with the bundle
#                             carried: runs every GPU test and fails if one
#                             skips; trains the CUDA Fashion-MNIST job under
#                             OneDevice and under MultiWorkerMirrored with 2
#                             agents sharing the GPU; runs the NCCL
#                             communicator; times the same model and batch in
#                             PyTorch on the GPU; prints the steps/s ratio.
#                             A summary goes to $OUT/gpu_check.txt when $OUT
#                             is set.
set -euo pipefail
cd "$(dirname "$0")/.."
bundle=gpu_bundle
archive=gpu_bundle.tar.gz
limit=$((64 * 1024 * 1024))
# Shared libraries every Linux with a C++ toolchain has, and the CUDA ones
# that come with the GPU machine's driver and toolkit.
system_libs='^(linux-vdso|ld-linux|libc|libm|libdl|librt|libpthread|libgcc_s|libstdc\+\+|libcuda|libcudart|libcublas|libcublasLt|libnccl)\.'

pack() {
  tools/setup.sh
  tools/build.sh -DCOHORT_WITH_CUDA=ON
  rm -rf "$bundle" "$archive"
  mkdir -p "$bundle"/{bin,lib,tests,deps,data}
  local b
  for b in cohort-coordinator cohort-agent cohort-ps cohortctl \
           cohort-example-fmnist-data; do
    strip -o "$bundle/bin/$b" "build/bin/$b"
  done
  for b in cohort_nccl_test cohort_agent_test; do
    strip -o "$bundle/tests/$b" "build/tests/$b"
  done
  for b in build/lib/*.so; do strip -o "$bundle/lib/$(basename "$b")" "$b"; done
  local dep name
  for dep in $(ldd "$bundle"/bin/* "$bundle"/tests/* "$bundle"/lib/*.so 2>/dev/null |
               awk '$2 == "=>" && $3 ~ /^\// {print $3}' | sort -u); do
    name="$(basename "$dep")"
    if ! grep -qE "$system_libs" <<<"$name"; then
      strip -o "$bundle/deps/$name" "$dep" 2>/dev/null || cp -L "$dep" "$bundle/deps/$name"
    fi
  done
  cp /usr/share/datasets/fashion-mnist/*.gz "$bundle/data/"
  tar -czf "$archive" "$bundle"
  local size
  size=$(stat -c %s "$archive")
  echo "gpu_check: $archive is $((size / 1024 / 1024)) MiB ($(ls "$bundle/deps" | wc -l) libraries from ldd)"
  if [ "$size" -gt "$limit" ]; then
    echo "gpu_check: over the 64 MiB a device run may carry" >&2
    exit 1
  fi
  echo "gpu_check: now run \`tools/gpu_check.sh run\` on the GPU machine, carrying $archive"
}

# Adds to LD_LIBRARY_PATH the first directory holding each library.
find_libs() {
  local lib dir found
  for lib in "$@"; do
    found=""
    for dir in /usr/local/cuda/lib64 /usr/local/cuda/lib /usr/local/cuda/targets/x86_64-linux/lib \
               /usr/lib/x86_64-linux-gnu \
               $(python3 -c 'import site; print(" ".join(site.getsitepackages()))' 2>/dev/null |
                 xargs -I{} sh -c 'ls -d {}/nvidia/*/lib 2>/dev/null'); do
      if [ -e "$dir/$lib" ]; then found="$dir"; break; fi
    done
    if [ -z "$found" ]; then
      echo "gpu_check: $lib is not on this machine" >&2
      return 1
    fi
    LD_LIBRARY_PATH="$found:$LD_LIBRARY_PATH"
  done
}

run() {
  local out="${OUT:-}" summary
  if [ -z "$out" ]; then
    out="$(mktemp -d "${TMPDIR:-/tmp}/cohort-gpu-check.XXXXXX")"
    echo "gpu_check: results in $out" >&2
  fi
  summary="$out/gpu_check.txt"
  : >"$summary"
  say() { echo "$*" | tee -a "$summary"; }
  if ! command -v nvidia-smi >/dev/null || ! nvidia-smi -L >/dev/null 2>&1; then
    say "gpu_check: no GPU here (nvidia-smi finds none); the GPU checks need one"
    exit 2
  fi
  [ -d "$bundle" ] || tar -xzf "$archive"
  export LD_LIBRARY_PATH="$PWD/$bundle/deps:${LD_LIBRARY_PATH:-}"
  find_libs libcudart.so.13 libcublas.so.13 libnccl.so.2
  say "gpu: $(nvidia-smi -L | head -1)"
  local failed=0

  # Every GPU test, none skipped (the one that checks the CPU-only case
  # skips where a GPU is, and is left out). The examples' CUDA libraries
  # run in the jobs below: their unit tests use the fake runtime's CPU
  # devices, and run in CI.
  local test filter log
  for test in "cohort_nccl_test:NcclCommunicatorTest.*" \
              "cohort_agent_test:OptimizerKernelsCudaTest.*:DeviceDiscoveryTest.GpusAreReportedThroughTheCudaRuntime"; do
    filter="${test#*:}"
    log="$out/${test%%:*}.log"
    # Passed, none skipped, and not a filter that matched nothing.
    if "$bundle/tests/${test%%:*}" --gtest_filter="$filter" >"$log" 2>&1 &&
       ! grep -q "SKIPPED \]" "$log" &&
       ! grep -qE '^\[  PASSED  \] 0 tests' "$log"; then
      say "PASS ${test%%:*} ($filter): $(grep -E '^\[  PASSED' "$log")"
    else
      say "FAIL ${test%%:*} ($filter): see $log"; failed=1
    fi
  done

  # A local cluster whose two agents share the GPU.
  local bin="$bundle/bin"
  source tools/lib/local_cluster.sh
  if ! start_local_cluster "$bin" "$(mktemp -d)" "$out/up.log"; then
    say "FAIL the local cluster did not come up (see $out/up.log)"
    return 1
  fi
  local state="$local_cluster_state"
  "$bin/cohortctl" status | tee -a "$summary"
  "$bin/cohort-example-fmnist-data" --source="$bundle/data" --out="$state/fmnist" >/dev/null

  # Trains to the end and prints the job's status as JSON; the progress view
  # goes to $out/submit.log.
  fmnist_job() {  # strategy steps eval_every
    "$bin/cohortctl" submit --library="$bundle/lib/libcohort_example_fmnist_cuda.so" \
      --init=fmnist_cuda_init --step=fmnist_cuda_step --dataset=fmnist_cuda_data \
      --strategy="$1" --devices_per_agent=1 --steps="$2" --global_batch=128 --seed=1 \
      --config="{\"data_dir\": \"$state/fmnist\", \"source_dir\": \"$PWD/$bundle/data\", \"eval_every\": $3}" \
      --wait --json 2>>"$out/submit.log"
  }
  field() {  # json-text key
    python3 -c 'import json,sys; print(json.loads(sys.argv[1])[sys.argv[2]])' "$1" "$2"
  }
  # Two agents on one GPU: NCCL takes one rank per GPU, so AUTO has their
  # replicas reduce through host memory, and says so in the job's status.
  local strategy json
  for strategy in one_device multi_worker_mirrored; do
    if json="$(fmnist_job "$strategy" 3000 1000)"; then
      say "PASS fmnist_cuda $strategy: $(field "$json" state), $(field "$json" step) steps, $(python3 -c 'import json,sys; print(json.loads(sys.argv[1]).get("metrics", {}))' "$json")"
    else
      say "FAIL fmnist_cuda $strategy: $json (see $out/submit.log)"; failed=1
    fi
  done

  # Steps/s as bench/fmnist_bench.sh measures them: STEPS / (time of a
  # 2*STEPS job - time of a STEPS job), which cancels a job's start and its
  # final evaluation; no evaluation in between.
  local steps=2000 short long rate=""
  if short="$(fmnist_job one_device "$steps" 0)" && long="$(fmnist_job one_device $((2 * steps)) 0)"; then
    rate="$(python3 - "$steps" "$short" "$long" <<'PY'
import json, sys
steps = int(sys.argv[1])
t = [int(j["end_time_unix_ms"]) - int(j["submit_time_unix_ms"])
     for j in (json.loads(a) for a in sys.argv[2:])]
print(round(steps / ((t[1] - t[0]) / 1000), 1))
PY
)"
  else
    say "FAIL the timed fmnist_cuda jobs (see $out/submit.log)"; failed=1
  fi

  # The same model and batch in PyTorch on this GPU.
  local torch
  if torch="$(python3 bench/torch_fashion_mnist.py --device=cuda --source="$bundle/data" --steps=3000)"; then
    say "torch: $torch"
    python3 - "$rate" "$torch" <<'PY' | tee -a "$summary"
import json, sys
cohort = float(sys.argv[1]) if sys.argv[1] else float("nan")
torch = json.loads(sys.argv[2])["steps_per_s"]
print(f"steps/s on the GPU, one replica: cohort {cohort:.1f}, torch {torch:.1f}, "
      f"ratio {cohort / torch:.2f}x")
PY
  else
    say "FAIL torch on the GPU"; failed=1
  fi
  return "$failed"
}

case "${1:-}" in
  pack) pack ;;
  run) run ;;
  *) echo "usage: tools/gpu_check.sh pack|run (see the top of this file)" >&2; exit 2 ;;
esac
