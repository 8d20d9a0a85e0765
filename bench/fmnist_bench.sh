#!/usr/bin/env bash
# Fashion-MNIST, Cohort beside PyTorch: the same MLP, Adam, global batch 128,
# one thread per process, the same data, on 1 process (Cohort: OneDevice on
# one agent) and 2 processes (Cohort: MultiWorkerMirrored over 2 agents of
# one device each; torch: DDP over gloo). The two run interleaved, ROUNDS
# times. For each it prints steps/s and the seconds and steps to reach
# TARGET test accuracy (evaluated every 100 steps, evaluation included),
# then the Cohort/torch ratios.
#
#   bench/fmnist_bench.sh            # ROUNDS=2 TARGET=0.85 STEPS=1000
#
# Cohort's steps/s is STEPS / (time of a 2*STEPS job - time of a STEPS job),
# which cancels a job's start and its final test evaluation; its time to
# the target is that of a job the early-stopping rule ends at TARGET, from
# submission to end (library upload and start included).
set -euo pipefail
cd "$(dirname "$0")/.."
rounds="${ROUNDS:-2}"
target="${TARGET:-0.85}"
steps="${STEPS:-1000}"
bin=build/bin
python=/usr/bin/python3  # Debian's own: it sees python3-torch
# torch, and the OpenBLAS that Debian's BLAS alternative then points it at,
# instead of the reference BLAS.
tools/setup.sh python3-torch libopenblas0-pthread

source tools/lib/local_cluster.sh
state="$(mktemp -d "${TMPDIR:-/tmp}/cohort-fmnist-bench.XXXXXX")"
start_local_cluster "$bin" "$state" "$state/up.log" --cpu_devices=1
"$bin/cohort-example-fmnist-data" --out="$state/fmnist" --files=8 >/dev/null

# Submits a job and prints its status as JSON once it succeeded; a job that
# failed ends the script, since its times would be those of a crash.
cohort_job() {  # strategy steps [extra flags...]
  local strategy="$1" n="$2"
  shift 2
  local id
  id="$("$bin/cohortctl" submit --library=build/lib/libcohort_example_fmnist.so \
    --init=fmnist_init --step=fmnist_step --dataset=fmnist_data \
    --strategy="$strategy" --devices_per_agent=1 --steps="$n" \
    --global_batch=128 --seed=1 "$@")"
  if ! "$bin/cohortctl" watch "$id" >/dev/null; then
    echo "fmnist_bench: job $id did not succeed:" >&2
    "$bin/cohortctl" job "$id" >&2 || true
    return 1
  fi
  "$bin/cohortctl" job "$id" --json
}

field() {  # json-text key...
  "$python" -c 'import json,sys; j=json.loads(sys.argv[1])
for k in sys.argv[2:]: j=j[k]
print(j)' "$@"
}

cohort_run() {  # procs
  local strategy=one_device
  [ "$1" -gt 1 ] && strategy=multi_worker_mirrored
  local config="{\"data_dir\": \"$state/fmnist\"}"
  local short long
  short="$(cohort_job "$strategy" "$steps" --config="$config")"
  long="$(cohort_job "$strategy" $((2 * steps)) --config="$config")"
  local t1 t2
  t1=$(( $(field "$short" end_time_unix_ms) - $(field "$short" submit_time_unix_ms) ))
  t2=$(( $(field "$long" end_time_unix_ms) - $(field "$long" submit_time_unix_ms) ))
  local early
  early="$(cohort_job "$strategy" 5000 \
    --config="{\"data_dir\": \"$state/fmnist\", \"eval_every\": 100}" \
    --early_stop_metric=accuracy --early_stop_maximize \
    --early_stop_target="$target")"
  local te
  te=$(( $(field "$early" end_time_unix_ms) - $(field "$early" submit_time_unix_ms) ))
  "$python" - "$1" "$steps" "$t1" "$t2" "$te" "$early" <<'PY'
import json, sys
procs, steps, t1, t2, te = (int(a) for a in sys.argv[1:6])
early = json.loads(sys.argv[6])
print(json.dumps({
    "framework": "cohort", "procs": procs, "threads": 1, "global_batch": 128,
    "steps_per_s": round(steps / ((t2 - t1) / 1000), 2),
    # None unless the job reached the target, as the torch script reports.
    "steps_to_target": int(early.get("stopped_at_step", 0)) or None,
    "seconds_to_target": round(te / 1000, 2)
                         if int(early.get("stopped_at_step", 0)) else None,
    "accuracy": round(early["metrics"]["accuracy"], 4)}))
PY
}

results="$state/results.jsonl"
for round in $(seq 1 "$rounds"); do
  for procs in 1 2; do
    echo "round $round, $procs process(es): cohort" >&2
    cohort_run "$procs" | tee -a "$results"
    echo "round $round, $procs process(es): torch" >&2
    "$python" bench/torch_fashion_mnist.py --procs="$procs" --steps="$steps" \
      --target="$target" | tee -a "$results"
  done
done

"$python" - "$results" <<'PY'
import json, statistics, sys
rows = [json.loads(line) for line in open(sys.argv[1])]
print("\n| procs | cohort steps/s | torch steps/s | ratio | cohort s to target "
      "| torch s to target | ratio |")
print("|---|---|---|---|---|---|---|")
for procs in (1, 2):
    def med(framework, key):
        values = [r[key] for r in rows
                  if r["framework"] == framework and r["procs"] == procs
                  and r[key] is not None]
        return statistics.median(values) if values else float("nan")
    c, t = med("cohort", "steps_per_s"), med("torch", "steps_per_s")
    ct, tt = med("cohort", "seconds_to_target"), med("torch", "seconds_to_target")
    print(f"| {procs} | {c:.1f} | {t:.1f} | {c / t:.2f}x | {ct:.2f} | {tt:.2f} "
          f"| {tt / ct:.2f}x |")
PY
