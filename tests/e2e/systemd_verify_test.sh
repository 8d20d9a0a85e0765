#!/usr/bin/env bash
# Runs `systemd-analyze verify` on every unit in deploy/systemd/ and fails on
# any complaint about them.
#
#   tests/e2e/systemd_verify_test.sh BIN_DIR REPO_ROOT
#
# BIN_DIR holds the built cohort-* binaries; REPO_ROOT is the source tree.
# Exit 0: all units verified cleanly. Exit 1: an error (the verifier's output
# is printed). Exit 77 (CTest's skip code): systemd-analyze is not installed.
#
# `verify` insists that ExecStart= binaries exist, and /usr/local/bin/cohort-*
# does not on a build machine. So the units are copied to a temp dir with the
# Exec paths pointed at BIN_DIR, and nothing is written anywhere else.
# Template units cannot be verified as such, so each foo@.service gets an
# instance symlink foo@0.service beside it: the instance is then loaded from
# the template exactly as systemd would load it on a real host. User=cohort is
# left alone: verify does not resolve users, so it need not exist here.

set -euo pipefail

if [[ $# -ne 2 ]]; then
  echo "usage: $0 BIN_DIR REPO_ROOT" >&2
  exit 2
fi

if ! command -v systemd-analyze >/dev/null 2>&1; then
  echo "systemd_verify_test: SKIP: systemd-analyze is not installed"
  exit 77
fi

bin_dir=$(cd "$1" && pwd)
repo_root=$(cd "$2" && pwd)
unit_src="$repo_root/deploy/systemd"

shopt -s nullglob
units=("$unit_src"/*.service)
shopt -u nullglob
if [[ ${#units[@]} -eq 0 ]]; then
  echo "systemd_verify_test: FAIL: no unit files in $unit_src" >&2
  exit 1
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/cohort-systemd-verify.XXXXXX")
trap 'rm -rf "$work"' EXIT

# Copy each unit, rewriting /usr/local/bin/ to BIN_DIR on Exec*= lines only
# (continuation lines of ExecStart= carry flags, not the binary).
to_verify=()
for src in "${units[@]}"; do
  name=$(basename "$src")
  while IFS= read -r line || [[ -n $line ]]; do
    if [[ $line == Exec* ]]; then
      line=${line//\/usr\/local\/bin\//$bin_dir\/}
    fi
    printf '%s\n' "$line"
  done <"$src" >"$work/$name"
  if [[ $name == *@.service ]]; then
    # Agent instances are tasks, ps instances indices. The task's ':' is
    # written escaped (worker\x3a0): verify cannot load a unit file whose
    # name holds a raw ':', and the unit must accept that form anyway.
    index=0
    [[ $name == cohort-agent@.service ]] && index='worker\x3a0'
    instance="${name%@.service}@$index.service"
    ln -s "$name" "$work/$instance"
    to_verify+=("$work/$instance")
  else
    to_verify+=("$work/$name")
  fi
done

args=(verify --man=no)
# Since systemd 250: do not fail on errors in units that ours merely pull in
# (network-online.target's dependencies, say), which the host provides.
if grep -q -- '--recursive-errors' <<<"$(systemd-analyze --help 2>/dev/null)"; then
  args+=(--recursive-errors=no)
fi

set +e
output=$(SYSTEMD_LOG_COLOR=0 systemd-analyze "${args[@]}" "${to_verify[@]}" 2>&1)
rc=$?
set -e

# Every complaint about our units names the unit ("cohort-ps@0.service: ...")
# or its file in $work ("/tmp/...:23: Failed to parse ..."). Other lines are
# about the host's own units, which the container or build machine may have
# half-configured; show them, but they do not fail the test.
indent() { sed 's/^/  | /'; }

ours=$(grep -F -e cohort -e "$work" <<<"$output" || true)
unrelated=$(grep -v -F -e cohort -e "$work" <<<"$output" || true)

if [[ -n $unrelated ]]; then
  echo "systemd_verify_test: ignoring output about units not ours:"
  indent <<<"$unrelated"
fi

names=()
for unit in "${to_verify[@]}"; do names+=("$(basename "$unit")"); done

if [[ $rc -ne 0 || -n $ours ]]; then
  echo "systemd_verify_test: FAIL: systemd-analyze verify exited $rc on ${names[*]}" >&2
  if [[ -n $ours ]]; then
    # Name the source files, not their temp copies (lines are unchanged).
    indent <<<"${ours//"$work"\//deploy/systemd/}" >&2
  else
    indent <<<"$output" >&2
  fi
  exit 1
fi

echo "systemd_verify_test: OK: ${names[*]} ($(systemd-analyze --version | head -n1))"
