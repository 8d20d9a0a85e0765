#!/usr/bin/env bash
# Builds the container image of deploy/container/ and trains a job across
# hosts, each running the image.
#
#   tests/e2e/container_image_test.sh BIN_DIR REPO_ROOT
#
# BIN_DIR holds the built binaries (BIN_DIR/../lib the step libraries);
# REPO_ROOT is the source tree. Exit 0: the image built and the job
# succeeded. Exit 1: a failure (the failing step's output is printed).
# Exit 77 (CTest's skip code): not root, or the Debian mirror (from
# /etc/apt/sources.list*) cannot be reached (or no curl, wget or python3
# is here to try), before debootstrap or after it failed, or
# podman/debootstrap are missing and cannot be installed.
#
# 1. A Debian 12 base: `debootstrap --variant=minbase bookworm`, imported
#    with `podman import` as localhost/cohort-debian12-base. The root file
#    system is kept as a tarball under ${XDG_CACHE_HOME:-~/.cache}/
#    cohort-container and the image in podman's store, so reruns skip it.
# 2. The image: make-context.sh stages the binaries, then `podman build
#    --isolation=chroot` makes localhost/cohort:latest. It stays in the
#    store for inspection.
# 3. The image's root, from `podman image mount`, under a writable overlay
#    per host, run with chroot as the image's user on test hosts
#    (tests/testing/testhosts.sh: network, UTS and IPC namespaces):
#    `podman run` would need cgroups that a build machine may not offer.
#    Host 1 runs the coordinator (--launch=none), hosts 2 and 3 an agent
#    (chief:0, worker:0), host 4 a ps task, each from its TF_CONFIG.
#    cohortctl, from the image on host 1, submits the MLP example under
#    ParameterServer and the linear one under MultiWorkerMirrored, and
#    waits for both to succeed. The image's HEALTHCHECK must pass on every
#    host, and fail once the coordinator is stopped.
#
# Everything made here is removed on exit: daemons (by pid), the hosts'
# namespaces and mounts, the image mount and temp files. The store keeps
# the images.

set -euo pipefail

if [[ $# -ne 2 ]]; then
  echo "usage: $0 BIN_DIR REPO_ROOT" >&2
  exit 2
fi

log() { echo "container_image_test: $*"; }
skip() { log "SKIP: $*"; exit 77; }
fail() { log "FAIL: $*" >&2; exit 1; }
indent() { sed 's/^/  | /'; }

[[ $(id -u) -eq 0 ]] || skip "needs root (debootstrap, podman, namespaces, mounts)"

bin_dir=$(cd "$1" && pwd)
repo_root=$(cd "$2" && pwd)
build_dir=$(dirname "$bin_dir")
testhosts="$repo_root/tests/testing/testhosts.sh"
for name in cohort-coordinator cohort-agent cohort-ps cohortctl cohort-example-mlp-data; do
  [[ -x $bin_dir/$name ]] || fail "$bin_dir/$name is missing: build the tree first"
done
for name in libcohort_example_mlp.so libcohort_example_linear.so; do
  [[ -f $build_dir/lib/$name ]] || fail "$build_dir/lib/$name is missing: build the tree first"
done

started=$(date +%s)
elapsed() { echo "$(($(date +%s) - started))s"; }

image=localhost/cohort:latest
base=localhost/cohort-debian12-base:latest
cache_dir=${XDG_CACHE_HOME:-$HOME/.cache}/cohort-container
base_tarball=$cache_dir/debian12-minbase.tar.gz

work=$(mktemp -d "${TMPDIR:-/tmp}/cohort-container-test.XXXXXX")
hosts_set=""
image_mounted=""
pids=()

# Unmounts whatever is still mounted under $work (an interrupted debootstrap
# leaves /proc and /sys in its target), deepest first.
unmount_under_work() {
  local target
  awk -v dir="$work/" 'index($2, dir) == 1 { print $2 }' /proc/self/mounts |
    sort -r | while read -r target; do
      umount -l "$target" 2>/dev/null || true
    done
}

cleanup() {
  local rc=$? pid i
  set +e
  for pid in "${pids[@]}"; do
    kill -TERM "$pid" 2>/dev/null
  done
  for pid in "${pids[@]}"; do
    for i in $(seq 1 50); do
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.1
    done
    kill -KILL "$pid" 2>/dev/null
    wait "$pid" 2>/dev/null
  done
  if [[ -n $hosts_set ]]; then
    for i in 1 2 3 4; do
      [[ -d $work/host$i/root ]] &&
        "$testhosts" exec "$hosts_set" "$i" umount -R "$work/host$i/root" 2>/dev/null
    done
    "$testhosts" down "$hosts_set" >/dev/null 2>&1
  fi
  [[ -n $image_mounted ]] && podman image unmount "$image" >/dev/null 2>&1
  unmount_under_work
  rm -rf --one-file-system "$work"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 1' INT TERM HUP

# --- Tools -----------------------------------------------------------------

# The first Debian archive URI of the apt sources whose suite is $1
# (one-line .list files and deb822 .sources files).
apt_source() {
  local suite=$1 file
  shopt -s nullglob
  for file in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
    [[ -f $file ]] || continue
    awk -v suite="$suite" '
      $1 == "deb" { i = 2; if ($2 ~ /^\[/) { while (i <= NF && $i !~ /\]$/) i++; i++ }
                    if ($(i + 1) == suite) { print $i; exit } }' "$file"
  done
  for file in /etc/apt/sources.list.d/*.sources; do
    awk -v suite="$suite" '
      function flush() { if (deb && uri != "" && (" " suites " ") ~ (" " suite " ")) print uri
                         deb = 0; uri = ""; suites = "" }
      /^[ \t]*$/ { flush(); next }
      tolower($1) == "types:" { for (i = 2; i <= NF; i++) if ($i == "deb") deb = 1 }
      tolower($1) == "uris:" { uri = $2 }
      tolower($1) == "suites:" { $1 = ""; suites = $0 }
      END { flush() }' "$file"
  done
  shopt -u nullglob
}

mirror=$(apt_source bookworm | head -n1)
mirror=${mirror:-http://deb.debian.org/debian}
security=$(apt_source bookworm-security | head -n1)
security=${security:-http://deb.debian.org/debian-security}
mirror=${mirror%/}
security=${security%/}

# Fails when no tool here can tell.
reachable() {
  if command -v curl >/dev/null; then
    curl -fsS --max-time 20 -o /dev/null "$1"
  elif command -v wget >/dev/null; then
    wget -q -T 20 -t 1 -O /dev/null "$1"
  elif command -v python3 >/dev/null; then
    python3 -c 'import sys, urllib.request; urllib.request.urlopen(sys.argv[1], timeout=20)' "$1"
  else
    return 1
  fi
}
reachable "$mirror/dists/bookworm/Release" 2>/dev/null ||
  skip "the Debian mirror $mirror cannot be reached (or no curl, wget or python3 to try it)"

missing=()
command -v debootstrap >/dev/null || missing+=(debootstrap)
command -v podman >/dev/null || missing+=(podman)
for tool in ip nsenter unshare chroot; do
  command -v "$tool" >/dev/null || skip "needs '$tool' (Debian: iproute2, util-linux, coreutils)"
done
if [[ ${#missing[@]} -gt 0 ]]; then
  log "installing ${missing[*]}"
  { apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y \
      --no-install-recommends "${missing[@]}"; } >"$work/apt.log" 2>&1 || {
    tail -n 20 "$work/apt.log" | indent
    skip "cannot install ${missing[*]} with apt-get"
  }
fi

# --- 1. The base image -----------------------------------------------------

mkdir -p "$cache_dir"
# One run at a time makes the base; a second waits for it.
exec 9>"$cache_dir/lock"
flock -w 1200 9 || fail "another run holds $cache_dir/lock"

if podman image exists "$base"; then
  log "base: $base (in the store)"
else
  if [[ ! -s $base_tarball ]]; then
    log "base: debootstrap --variant=minbase bookworm from $mirror"
    rootfs=$work/rootfs
    if ! debootstrap --variant=minbase bookworm "$rootfs" "$mirror" \
         >"$work/debootstrap.log" 2>&1; then
      tail -n 30 "$work/debootstrap.log" | indent >&2
      # A mirror gone since the probe is the network's doing; one that
      # still answers makes the failure ours.
      reachable "$mirror/dists/bookworm/Release" 2>/dev/null ||
        skip "debootstrap failed: the mirror $mirror no longer answers (log above)"
      fail "debootstrap failed (log above)"
    fi
    unmount_under_work
    # Release, updates and security, as the debian:12 image has them.
    rm -f "$rootfs/etc/apt/sources.list"
    cat >"$rootfs/etc/apt/sources.list.d/debian.sources" <<SOURCES
Types: deb
URIs: $mirror
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: $security
Suites: bookworm-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SOURCES
    # What a base image does without: downloaded packages, package lists,
    # documentation (copyright files stay) and translations.
    rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/cache/apt/*.bin \
      "$rootfs"/var/lib/apt/lists/* "$rootfs"/usr/share/man/* \
      "$rootfs"/usr/share/info/* "$rootfs"/usr/share/locale/* \
      "$rootfs"/var/log/*.log "$rootfs"/var/log/apt/*
    find "$rootfs/usr/share/doc" -mindepth 1 -not -name copyright -not -type d -delete
    tar -C "$rootfs" --numeric-owner -czf "$base_tarball.tmp" .
    mv "$base_tarball.tmp" "$base_tarball"
    rm -rf --one-file-system "$rootfs"
  fi
  log "base: podman import $base_tarball"
  podman import \
    --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --change 'CMD ["bash"]' "$base_tarball" "$base" >"$work/import.log" 2>&1 || {
    indent <"$work/import.log" >&2
    fail "podman import failed"
  }
fi
flock -u 9
exec 9>&-
log "base ready after $(elapsed)"

# --- 2. The image ----------------------------------------------------------

"$repo_root/deploy/container/make-context.sh" "$build_dir" "$work/context" | indent ||
  fail "make-context.sh failed"
log "podman build --isolation=chroot -t $image"
if ! podman build --isolation=chroot --format docker --pull=never \
     --build-arg BASE="$base" -f "$repo_root/deploy/container/Containerfile" \
     -t "$image" "$work/context" >"$work/build.log" 2>&1; then
  tail -n 40 "$work/build.log" | indent >&2
  fail "podman build failed"
fi
size=$(podman image inspect --format '{{.Size}}' "$image")
log "image $image: $size bytes ($((size / 1024 / 1024)) MiB), built after $(elapsed)"

user=$(podman image inspect --format '{{.Config.User}}' "$image")
[[ $user == 10001:10001 ]] || fail "the image runs as '$user', not 10001:10001"
# The HEALTHCHECK's test, one element a line: CMD then its argv, or
# CMD-SHELL then a shell command.
mapfile -t health < <(podman image inspect \
  --format '{{range .Config.Healthcheck.Test}}{{println .}}{{end}}' "$image")
case "${health[0]:-}" in
  CMD) health=("${health[@]:1}") ;;
  CMD-SHELL) health=(/bin/sh -c "${health[1]}") ;;
  *) fail "the image has no HEALTHCHECK (built without --format docker?)" ;;
esac
log "HEALTHCHECK: ${health[*]}"

mount_point=$(podman image mount "$image")
image_mounted=yes

# Every library the binaries load resolves inside the image.
unresolved=$(chroot "$mount_point" /bin/bash -c '
  for f in /usr/local/bin/* /usr/local/lib/cohort/*.so; do
    head -c 4 "$f" | grep -q ELF || continue
    ldd "$f" 2>&1 | sed -n "s|^\t*\(.*not found\)|$f: \1|p"
  done')
[[ -z $unresolved ]] || { indent <<<"$unresolved" >&2; fail "libraries missing from the image"; }

# --- 3. Hosts running the image --------------------------------------------

# Set names are at most 6 characters.
hosts_set="ct$(($$ % 10000))"
TESTHOSTS_OWNER=$$ "$testhosts" up "$hosts_set" 4 | indent ||
  fail "cannot make test hosts"
for i in 1 2 3 4; do
  addr[i]=$("$testhosts" addr "$hosts_set" "$i")
done

# Host I's root: the image under a writable layer of its own, with /proc,
# /sys and /dev (its private /dev/shm included), all in the host's mount
# namespace, so that they go with it.
for i in 1 2 3 4; do
  mkdir -p "$work/host$i"/{upper,overlay-work,root}
  "$testhosts" exec "$hosts_set" "$i" /bin/sh -ec "
    mount -t overlay overlay -o lowerdir=$mount_point,upperdir=$work/host$i/upper,workdir=$work/host$i/overlay-work $work/host$i/root
    mount -t proc proc $work/host$i/root/proc
    mount -t sysfs -o ro sysfs $work/host$i/root/sys
    mount --rbind /dev $work/host$i/root/dev" ||
    fail "cannot mount the image's root on host $i"
done

# host_command I [NAME=VALUE...] CMD...: sets `host_argv` to the argv that runs
# CMD in host I's root as the image's user, in a clean environment plus the
# NAME=VALUEs. testhosts.sh, nsenter, chroot and env each exec the next, so
# the process started is the one that ends up running CMD.
host_command() {
  local i=$1
  shift
  host_argv=("$testhosts" exec "$hosts_set" "$i" chroot --userspec="$user"
             "$work/host$i/root" /usr/bin/env -i PATH=/usr/local/bin:/usr/bin:/bin
             HOME=/var/lib/cohort "$@")
}
in_host() { host_command "$@"; "${host_argv[@]}"; }

mkdir -p "$work/logs"
declare -A daemon_pid
# start NAME I [NAME=VALUE...] CMD...: a daemon on host I, its output in
# logs/NAME.log. Started as a simple command (not in a subshell), so that
# $! is the daemon itself.
start() {
  local name=$1
  shift
  host_command "$@"
  "${host_argv[@]}" </dev/null >"$work/logs/$name.log" 2>&1 &
  pids+=($!)
  daemon_pid[$name]=$!
}

show_logs() {
  local file
  for file in "$work"/logs/*.log; do
    echo "--- $(basename "$file")"
    tail -n 25 "$file"
  done | indent >&2
}

cluster="{\"chief\": [\"${addr[2]}:2222\"], \"worker\": [\"${addr[3]}:2222\"], \"ps\": [\"${addr[4]}:2222\"]}"
coordinator=${addr[1]}:7070
tf_config() { echo "{\"cluster\": $cluster, \"task\": {\"type\": \"$1\", \"index\": $2}}"; }

start coordinator 1 "TF_CONFIG={\"cluster\": $cluster}" \
  cohort-coordinator --launch=none --listen="$coordinator" \
  --state_dir=/var/lib/cohort/coordinator
start chief-0 2 "TF_CONFIG=$(tf_config chief 0)" \
  cohort-agent --coordinator="$coordinator" --cpu_devices=2 \
  --state_dir=/var/lib/cohort/agent
start worker-0 3 "TF_CONFIG=$(tf_config worker 0)" \
  cohort-agent --coordinator="$coordinator" --cpu_devices=2 \
  --state_dir=/var/lib/cohort/agent
start ps-0 4 "TF_CONFIG=$(tf_config ps 0)" \
  cohort-ps --coordinator="$coordinator" --state_dir=/var/lib/cohort/ps

ctl() { in_host 1 cohortctl --coordinator="$coordinator" "$@"; }

# All three tasks READY, within 60 s.
ready=0
for _ in $(seq 1 60); do
  ready=$(ctl status --json 2>/dev/null | grep -c '"state": "READY"' || true)
  [[ $ready -eq 3 ]] && break
  for name in "${!daemon_pid[@]}"; do
    kill -0 "${daemon_pid[$name]}" 2>/dev/null || { show_logs; fail "$name exited"; }
  done
  sleep 1
done
[[ $ready -eq 3 ]] || { ctl status 2>&1 | indent >&2; show_logs; fail "the tasks did not all become READY in 60 s"; }
ctl status | indent
# The pids held for cleanup are the daemons themselves.
for name in "${!daemon_pid[@]}"; do
  comm=$(cat "/proc/${daemon_pid[$name]}/comm" 2>/dev/null || true)
  [[ $comm == cohort-* ]] || fail "pid ${daemon_pid[$name]} of $name runs '$comm', not the daemon"
done
# Each task reports its host's name: it ran in that host's namespaces.
status_json=$(ctl status --json)
for i in 2 3 4; do
  grep -q "\"hostname\": \"$hosts_set-$i\"" <<<"$status_json" ||
    fail "no task reports hostname $hosts_set-$i"
done

for i in 1 2 3 4; do
  if ! out=$(in_host "$i" "${health[@]}" 2>&1); then
    indent <<<"$out" >&2
    fail "the HEALTHCHECK fails on host $i"
  fi
  log "HEALTHCHECK on host $i: $out"
done

# Each agent makes its own copy of the data (the generator is seeded), as
# hosts that share no directory would.
for i in 2 3; do
  out=$(in_host "$i" cohort-example-mlp-data --out=/var/lib/cohort/spirals --files=6 2>&1) ||
    { indent <<<"$out" >&2; fail "cohort-example-mlp-data failed on host $i"; }
done

# submit_and_wait NAME ARGS...: submits from host 1, waits (at most 300 s),
# prints the job's final status; fails unless it SUCCEEDED.
submit_and_wait() {
  local name=$1 rc=0 out id
  shift
  log "job $name: cohortctl submit $*"
  host_command 1 cohortctl --coordinator="$coordinator" submit "$@" --wait
  out=$(timeout 300 "${host_argv[@]}" 2>&1) || rc=$?
  tail -n 3 <<<"$out" | indent
  id=$(sed -n 's/^job \(.*\) submitted$/\1/p' <<<"$out" | head -n1)
  [[ -n $id ]] || { indent <<<"$out" >&2; fail "job $name was not submitted"; }
  ctl job "$id" | indent
  if [[ $rc -ne 0 ]]; then
    show_logs
    fail "job $name ($id) did not succeed (cohortctl exited $rc)"
  fi
  # Captured first: grep -q leaves early, and under pipefail the writer's
  # SIGPIPE would fail the check.
  local json
  json=$(ctl job "$id" --json)
  grep -q '"state": "JOB_SUCCEEDED"' <<<"$json" ||
    fail "job $name ($id) is not JOB_SUCCEEDED"
  log "job $name ($id): SUCCEEDED after $(elapsed)"
}

lib=/usr/local/lib/cohort
submit_and_wait mlp-ps --library=$lib/libcohort_example_mlp.so \
  --init=mlp_init --step=mlp_step --dataset=mlp_data \
  --strategy=parameter_server --steps=600 --global_batch=128 --seed=3 \
  --devices_per_agent=2 \
  --config='{"data_dir": "/var/lib/cohort/spirals", "shard_policy": "file"}'
submit_and_wait linear-mwm --library=$lib/libcohort_example_linear.so \
  --init=linear_init --step=linear_step --dataset=linear_data \
  --strategy=multi_worker_mirrored --steps=300 --global_batch=64 \
  --devices_per_agent=2 --config='{"dim": 8}'

# With the coordinator stopped, its host's HEALTHCHECK must fail.
pid=${daemon_pid[coordinator]}
kill -TERM "$pid"
for _ in $(seq 1 100); do
  kill -0 "$pid" 2>/dev/null || break
  sleep 0.1
done
kill -0 "$pid" 2>/dev/null && fail "the coordinator did not stop on SIGTERM in 10 s"
if out=$(in_host 1 "${health[@]}" 2>&1); then
  indent <<<"$out" >&2
  fail "the HEALTHCHECK passes with the coordinator stopped"
fi
log "HEALTHCHECK on host 1, coordinator stopped: fails as it should: $out"

log "OK: image $image ($((size / 1024 / 1024)) MiB), jobs succeeded on 4 hosts in $(elapsed)"
