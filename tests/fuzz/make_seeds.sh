#!/usr/bin/env bash
# Writes the fuzz targets' seed corpora into tests/fuzz/corpus/<target>/:
# valid inputs of each kind, from which libFuzzer mutates. Protocol requests
# are written as text protos here and encoded with protoc; multi-request
# inputs use the framing of fuzz_input.h. Run from anywhere; rewrites the
# corpus directories it owns.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
out=$root/tests/fuzz/corpus
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT

# encode TYPE TEXT: the binary encoding of a cohort.v1 message.
encode() {
  printf '%s\n' "$2" |
    protoc -I"$root/proto" --encode="cohort.v1.$1" "$root"/proto/cohort/v1/*.proto
}
# frame KIND FILE: one request of a multi-request input.
frame() {
  python3 -c 'import struct,sys; d=open(sys.argv[2],"rb").read(); sys.stdout.buffer.write(bytes([int(sys.argv[1])])+struct.pack("<I",len(d))+d)' "$1" "$2"
}
seed() { mkdir -p "$out/$1"; cat >"$out/$1/$2"; }
msg() { encode "$1" "$2" >"$scratch/$3"; }

# --- cluster specs (JSON, as files and TF_CONFIG)
seed cluster_spec_fuzzer two_workers.json <<'J'
{"cluster": {"chief": ["host0:2222"], "worker": ["host1:2222", "host2:2222"],
             "ps": ["host3:2222"]}, "task": {"type": "worker", "index": 1}}
J
seed cluster_spec_fuzzer ipv6.json <<'J'
{"cluster": {"worker": ["[::1]:5000", "127.0.0.1:5001"], "evaluator": ["e:1"]}}
J
seed cluster_spec_fuzzer bad_port.json <<'J'
{"cluster": {"worker": ["host:70000"]}, "task": {"type": "chief", "index": 0}}
J

# --- record files
python3 - "$out" <<'P'
import os, struct, sys, zlib
out = os.path.join(sys.argv[1], "record_reader_fuzzer")
os.makedirs(out, exist_ok=True)
def record(data):
    length = struct.pack("<Q", len(data))
    return length + struct.pack("<I", zlib.crc32(length)) + data + struct.pack("<I", zlib.crc32(data))
open(os.path.join(out, "two_records"), "wb").write(b"COHREC01" + record(b"first") + record(b"\x00" * 40))
open(os.path.join(out, "empty_file"), "wb").write(b"COHREC01")
open(os.path.join(out, "torn_length"), "wb").write(b"COHREC01" + record(b"abc")[:10])
P

# --- checkpoints: latest, manifest, data
python3 - "$out" <<'P'
import json, os, struct, sys, zlib
out = os.path.join(sys.argv[1], "checkpoint_reader_fuzzer")
os.makedirs(out, exist_ok=True)
def frame(data):
    return b"\x00" + struct.pack("<I", len(data)) + data
data = struct.pack("<4f", 1, 2, 3, 4) + struct.pack("<2q", 7, -7)
manifest = {"format": 1, "step": 12, "data_size": len(data), "data_crc32": zlib.crc32(data),
            "tensors": [{"name": "dense/kernel", "dtype": "float32", "shape": [2, 2], "offset": 0, "size": 16},
                        {"name": "global_step", "dtype": "int64", "shape": [2], "offset": 16, "size": 16}]}
open(os.path.join(out, "two_tensors"), "wb").write(frame(b"12\n") + frame(json.dumps(manifest).encode()) + frame(data))
P

# --- ps snapshot payloads (the target adds the file header itself)
msg PsSnapshot 'shard_id: 0 job_id: "1" job_sequence: 1 updates: 3 variables { spec { name: "w" shape: [2] dtype: PS_FLOAT32 optimizer { kind: ADAM learning_rate: 0.01 beta1: 0.9 beta2: 0.999 } } value: "\000\000\200?\000\000\200?" slots: "\000\000\000\000\000\000\000\000" slots: "\000\000\000\000\000\000\000\000" step: 3 updates: 3 }' snapshot
seed snapshot_reader_fuzzer adam_shard <"$scratch/snapshot"

# --- job specs
digest=$(printf 'x' | sha256sum | cut -d' ' -f1)
msg JobSpec "strategy: MULTI_WORKER_MIRRORED library_digest: \"$digest\" step_fn: \"train_step\" steps: 100 global_batch_size: 64 checkpoint_every: 10 config_json: \"{\\\"lr\\\": 0.1}\"" mwms
msg JobSpec "strategy: PARAMETER_SERVER library_digest: \"$digest\" step_fn: \"train_step\" steps: 50 global_batch_size: 32 checkpoint_dir: \"/data/ckpt\" ps { }" ps_job
for name in mwms ps_job; do seed job_spec_fuzzer "$name" <"$scratch/$name"; done

# --- coordinator requests: register, heartbeat, submit, sync, closures
msg RegisterRequest 'report { task { type: "worker" index: 0 } address: "127.0.0.1:2" pid: 42 devices { kind: CPU index: 0 } }' register
msg HeartbeatRequest 'task { type: "worker" index: 0 } session_id: "s" report { task { type: "worker" index: 0 } address: "127.0.0.1:2" }' heartbeat
msg DeregisterRequest 'task { type: "worker" index: 0 } session_id: "s" reason: "shutdown"' deregister
msg AgentJobReport 'task { type: "worker" index: 0 } job_id: "1" attempt: 1 state: RUNNING step: 3' sync
msg ClosureRequest 'job_id: "1" attempt: 1 task { type: "worker" index: 0 } slot: 0 want: 1' closures
{ frame 0 "$scratch/register"; frame 3 "$scratch/mwms"; frame 4 "$scratch/sync";
  frame 1 "$scratch/heartbeat"; frame 2 "$scratch/deregister"; } | seed coordinator_requests_fuzzer mwms_job
{ frame 0 "$scratch/register"; frame 3 "$scratch/ps_job"; frame 4 "$scratch/sync";
  frame 5 "$scratch/closures"; } | seed coordinator_requests_fuzzer ps_job

# --- store requests
msg StoreSetRequest 'key: "group/address/0" value: "127.0.0.1:4000"' set
msg StoreGetRequest 'key: "group/address/0"' get
msg StoreGetRequest 'key: "group/address/1"' get_missing
msg StoreBarrierRequest 'name: "group/connected" participants: 2 rank: 0' barrier0
msg StoreBarrierRequest 'name: "group/connected" participants: 2 rank: 1' barrier1
{ frame 1 "$scratch/get_missing"; frame 0 "$scratch/set"; frame 1 "$scratch/get";
  frame 2 "$scratch/barrier0"; frame 2 "$scratch/barrier1"; } | seed store_requests_fuzzer rendezvous

# --- ps requests: create, push, pull
msg CreateVariablesRequest 'job_id: "1" job_sequence: 1 variables { name: "w" shape: [2, 2] dtype: PS_FLOAT32 optimizer { kind: SGD learning_rate: 0.1 } } variables { name: "mean" shape: [2] dtype: PS_FLOAT64 aggregation: PS_AGGREGATION_MEAN }' create
msg PushRequest 'job_id: "1" worker: "worker:0" chunks { name: "w" offset: 0 total_bytes: 16 data: "\000\000\200?\000\000\200?" } chunks { name: "w" offset: 8 total_bytes: 16 data: "\000\000\200?\000\000\200?" }' push
msg PullRequest 'job_id: "1" names: "w" names: "mean" worker: "worker:0"' pull
{ frame 0 "$scratch/create"; frame 1 "$scratch/push"; frame 2 "$scratch/pull"; } | seed ps_requests_fuzzer create_push_pull
# --- peer frames: [1 byte: slice size selector][the frame], payload first
# (as EncodePeerFrame writes it), as a plain PeerFrame encoding, and a batch
# of frames (a zero byte, then each frame's length and bytes).
msg PeerFrame 'group: "job1/epoch1" source_rank: 1 address: "127.0.0.1:4001" label: "worker:0"' hello
msg PeerFrame 'tag { sequence: 3 step: 1 chunk: 0 } op_signature: "allreduce float32 sum 4"' data_header
msg PeerFrame 'tag { sequence: 3 step: 1 chunk: 0 } op_signature: "allreduce float32 sum 4" payload: "\000\000\200?"' data_plain
msg PeerFrame 'abort: "rank 1 aborted the group" abort_code: 10' abort
python3 - "$scratch" "$out/peer_frame_fuzzer" <<'P'
import os, sys
scratch, out = sys.argv[1], sys.argv[2]
os.makedirs(out, exist_ok=True)
read = lambda name: open(os.path.join(scratch, name), "rb").read()
payload = bytes(range(16)) * 4
first = bytes([(4 << 3) | 2, len(payload)]) + payload + read("data_header")
batch = bytes([0, len(read("hello"))]) + read("hello") + bytes([len(first)]) + first
for name, cut, frame in [("hello", 7, read("hello")), ("payload_first", 13, first),
                         ("plain", 3, read("data_plain")), ("abort", 60, read("abort")),
                         ("batch", 5, batch)]:
    open(os.path.join(out, name), "wb").write(bytes([cut]) + frame)
P

echo "seeds written under $out"
