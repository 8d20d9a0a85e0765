#!/usr/bin/env bash
# Validates every manifest in deploy/kubernetes against the Kubernetes API
# schema (npm's kubernetes-models, see kubernetes_manifests_validate.cjs).
#
#   tests/e2e/kubernetes_manifests_test.sh [MANIFEST_DIR]
#
# MANIFEST_DIR defaults to deploy/kubernetes of this source tree.
# Exit 0: all valid. Exit 1: a manifest is invalid (each problem is printed).
# Exit 77 (CTest's skip code): node/npm missing, or the npm registry cannot
# be reached for the first install.
#
# Every *.yaml file is checked as it is; with kubectl (or kustomize) on PATH,
# so is what `kubectl apply -k` would send: the kustomization alone and with
# each of components/*. The npm packages are installed once, pinned, into
# ${XDG_CACHE_HOME:-~/.cache}/cohort-k8s-models. Before anything else the
# validator must reject a copy of a manifest with `replicas: "two"`, so that
# a validator that accepts everything cannot pass.

set -euo pipefail

if [[ $# -gt 1 ]]; then
  echo "usage: $0 [MANIFEST_DIR]" >&2
  exit 2
fi

here=$(cd "$(dirname "$0")" && pwd)
repo_root=$(cd "$here/../.." && pwd)
manifests=$(cd "${1:-$repo_root/deploy/kubernetes}" && pwd)
validator="$here/kubernetes_manifests_validate.cjs"

# kubernetes-models 4.x still supports Debian 12's node 18; 5.x needs 22.
packages=(kubernetes-models@4.5.1 yaml@2.9.1)

for tool in node npm; do
  if ! command -v "$tool" >/dev/null 2>&1; then
    echo "kubernetes_manifests_test: SKIP: $tool is not installed (apt-get install nodejs npm)"
    exit 77
  fi
done
if ! node -e 'process.exit(+process.versions.node.split(".")[0] >= 14 ? 0 : 1)'; then
  echo "kubernetes_manifests_test: SKIP: node $(node --version) is older than 14"
  exit 77
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/cohort-k8s-manifests.XXXXXX")
trap 'rm -rf "$work"' EXIT

cache="${XDG_CACHE_HOME:-${HOME:-$work}/.cache}/cohort-k8s-models"
mkdir -p "$cache"
stamp="$cache/installed"
# One install at a time: ctest may run this test beside another user of it.
exec 9>"$cache/.lock"
if ! flock -w 600 9; then
  echo "kubernetes_manifests_test: FAIL: $cache is locked by another install" >&2
  exit 1
fi
if [[ ! -d $cache/node_modules || "$(cat "$stamp" 2>/dev/null)" != "${packages[*]}" ]]; then
  rm -f "$stamp"
  [[ -f $cache/package.json ]] || echo '{"private": true}' >"$cache/package.json"
  echo "kubernetes_manifests_test: installing ${packages[*]} into $cache"
  if ! timeout 240 npm install --prefix "$cache" --no-audit --no-fund \
      --fetch-retries=2 --fetch-retry-maxtimeout=20000 --fetch-timeout=60000 \
      --no-save --loglevel=error "${packages[@]}" >"$work/npm.log" 2>&1; then
    sed 's/^/  | /' "$work/npm.log" | tail -n 20
    echo "kubernetes_manifests_test: SKIP: cannot install ${packages[*]} from the npm registry"
    exit 77
  fi
  echo "${packages[*]}" >"$stamp"
fi
flock -u 9
export NODE_PATH="$cache/node_modules"

validate() { node "$validator" "$@"; }

# The validator must be able to fail.
sed 's/^\(  replicas:\) .*/\1 "two"/' "$repo_root/deploy/kubernetes/worker.yaml" >"$work/broken.yaml"
if validate "$work/broken.yaml" >"$work/broken.log" 2>&1; then
  echo "kubernetes_manifests_test: FAIL: the validator accepted replicas: \"two\"" >&2
  sed 's/^/  | /' "$work/broken.log" >&2
  exit 1
fi
if ! grep -q '/spec/replicas must be integer' "$work/broken.log"; then
  echo "kubernetes_manifests_test: FAIL: the validator rejected replicas: \"two\" for another reason:" >&2
  sed 's/^/  | /' "$work/broken.log" >&2
  exit 1
fi
echo "== self-check: a worker.yaml with replicas: \"two\" is rejected"

status=0
files=()
while IFS= read -r -d '' f; do files+=("$f"); done \
  < <(find "$manifests" -type f \( -name '*.yaml' -o -name '*.yml' \) -print0 | sort -z)
if [[ ${#files[@]} -eq 0 ]]; then
  echo "kubernetes_manifests_test: FAIL: no manifests in $manifests" >&2
  exit 1
fi
echo "== ${#files[@]} files in $manifests"
(cd "$manifests" && validate "${files[@]#"$manifests"/}") || status=1

# What `kubectl apply -k` sends: the kustomization, then with each component.
kustomize=()
if command -v kubectl >/dev/null 2>&1; then
  kustomize=(kubectl kustomize)
elif command -v kustomize >/dev/null 2>&1; then
  kustomize=(kustomize build)
fi
if [[ ! -f $manifests/kustomization.yaml ]]; then
  :
elif [[ ${#kustomize[@]} -eq 0 ]]; then
  echo "== kubectl/kustomize not installed: the kustomize output (generated ConfigMap, replicas, components) is not checked"
else
  overlays=("")
  for component in "$manifests"/components/*/; do
    [[ -f $component/kustomization.yaml ]] && overlays+=("$(basename "$component")")
  done
  for component in "${overlays[@]}"; do
    label="kustomize${component:+ + components/$component}"
    # An overlay beside the copy; kustomize takes relative paths only.
    overlay="$work/overlay-${component:-base}"
    mkdir -p "$overlay"
    rel=$(realpath --relative-to="$overlay" "$manifests")
    {
      echo "resources: [$rel]"
      [[ -z $component ]] || echo "components: [$rel/components/$component]"
    } >"$overlay/kustomization.yaml"
    echo "== $label"
    if ! timeout 120 "${kustomize[@]}" "$overlay" >"$work/rendered.yaml" 2>"$work/kustomize.log"; then
      echo "INVALID $label: kustomize failed:"
      sed 's/^/  | /' "$work/kustomize.log"
      status=1
      continue
    fi
    validate --stdin "$label" <"$work/rendered.yaml" || status=1
  done
fi

if [[ $status -ne 0 ]]; then
  echo "kubernetes_manifests_test: FAIL" >&2
  exit 1
fi
echo "kubernetes_manifests_test: OK"
