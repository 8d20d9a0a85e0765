#!/usr/bin/env bash
# Runs each pod's entrypoint from deploy/kubernetes, for every ordinal of
# every StatefulSet and for the TFJob example, and checks the TF_CONFIG it
# composes against the replicas and Services (kubernetes_tf_config_check.py
# says exactly what). With the built daemons in BIN_DIR, each resulting
# command line is also run by the real daemon, which must accept TF_CONFIG
# and every flag. With kubectl here, what `kubectl kustomize` renders is
# compared too.
#
#   tests/e2e/kubernetes_tf_config_test.sh [BIN_DIR [MANIFEST_DIR]]
#
# MANIFEST_DIR defaults to deploy/kubernetes of this source tree.
# Exit 0: all checks passed. Exit 1: a check failed (each is printed).
# Exit 77 (CTest's skip code): python3 or its yaml module is missing.

set -euo pipefail

if [[ $# -gt 2 ]]; then
  echo "usage: $0 [BIN_DIR [MANIFEST_DIR]]" >&2
  exit 2
fi

here=$(cd "$(dirname "$0")" && pwd)
repo_root=$(cd "$here/../.." && pwd)
manifests=$(cd "${2:-$repo_root/deploy/kubernetes}" && pwd)

if ! command -v python3 >/dev/null 2>&1; then
  echo "kubernetes_tf_config_test: SKIP: python3 is not installed"
  exit 77
fi
if ! python3 -c 'import yaml' 2>/dev/null; then
  echo "kubernetes_tf_config_test: SKIP: python3's yaml module is missing (apt-get install python3-yaml)"
  exit 77
fi

bin_args=()
if [[ $# -ge 1 ]]; then
  missing=()
  for daemon in cohort-coordinator cohort-agent cohort-ps; do
    [[ -x $1/$daemon ]] || missing+=("$daemon")
  done
  if [[ ${#missing[@]} -eq 0 ]]; then
    bin_args=("$(cd "$1" && pwd)")
  else
    echo "kubernetes_tf_config_test: ${missing[*]} not built in $1: TF_CONFIG is checked with python's json only"
  fi
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/cohort-k8s-tf-config.XXXXXX")
trap 'rm -rf "$work"' EXIT

# What kustomize really makes of cluster.env, when kubectl is here.
rendered=()
if command -v kubectl >/dev/null 2>&1; then
  if ! timeout 120 kubectl kustomize "$manifests" >"$work/rendered.yaml"; then
    echo "kubernetes_tf_config_test: FAIL: kubectl kustomize $manifests failed" >&2
    exit 1
  fi
  rendered=("--rendered=$work/rendered.yaml")
else
  echo "kubernetes_tf_config_test: kubectl not installed: kustomize's replicas are emulated, not compared"
fi

if ! timeout 300 python3 "$here/kubernetes_tf_config_check.py" "${rendered[@]}" \
    "$manifests" "$work" "${bin_args[@]}"; then
  echo "kubernetes_tf_config_test: FAIL" >&2
  exit 1
fi
echo "kubernetes_tf_config_test: OK"
