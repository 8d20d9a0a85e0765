#!/usr/bin/env bash
# Stages the build context of deploy/container/Containerfile from a build
# tree: the image is made of built binaries, never compiled inside it.
#
#   deploy/container/make-context.sh BUILD_DIR CONTEXT_DIR
#
# CONTEXT_DIR (created; must be empty if it exists) gets
#   bin/                the daemons, cohortctl and the examples' tools
#   lib/                the example step libraries; the CUDA ones are left
#                       out (the image has no CUDA libraries for them)
#   runtime/            shared libraries the binaries load that no Debian
#                       package holds (a CUDA build's libcudart and libnccl);
#                       empty for a build without CUDA
#   cohort-healthcheck  the HEALTHCHECK probe
# Binaries and step libraries are stripped (strip --strip-unneeded) when
# `strip` is installed; STRIP=: keeps their symbols. It prints the Debian
# packages holding the other libraries (ldd, then dpkg -S): the image's
# RUNTIME_PACKAGES must cover them.
set -euo pipefail

if [ $# -ne 2 ]; then
  echo "usage: $0 BUILD_DIR CONTEXT_DIR" >&2
  exit 2
fi
build=$1
context=$2
here=$(cd "$(dirname "$0")" && pwd)
die() { echo "make-context: $*" >&2; exit 1; }

daemons=(cohort-coordinator cohort-agent cohort-ps cohortctl)
for name in "${daemons[@]}"; do
  [ -x "$build/bin/$name" ] || die "$build/bin/$name is missing: build the tree first"
done
if [ -e "$context" ] && [ -n "$(ls -A "$context")" ]; then
  die "$context is not empty"
fi
command -v ldd >/dev/null && command -v dpkg >/dev/null ||
  die "needs ldd and dpkg: the binaries must come from a Debian build"
mkdir -p "$context/bin" "$context/lib" "$context/runtime"

shopt -s nullglob
for file in "${daemons[@]/#/$build/bin/}" "$build"/bin/cohort-example-*; do
  install -m 0755 "$file" "$context/bin/"
done
for file in "$build"/lib/libcohort_example_*.so; do
  case "$(basename "$file")" in *cuda*) continue ;; esac
  install -m 0644 "$file" "$context/lib/"
done
shopt -u nullglob
install -m 0755 "$here/cohort-healthcheck" "$context/"

strip_tool=${STRIP:-strip}
if command -v "$strip_tool" >/dev/null; then
  "$strip_tool" --strip-unneeded "$context"/bin/* "$context"/lib/*
fi

# Each library ldd resolves, by the package that holds it. dpkg knows a
# file by the path it installed, so each is also looked up by its target
# (alternatives links) and both without /usr (usr-merged systems), all in
# one dpkg call.
mapfile -t libraries < <(ldd "$context"/bin/* "$context"/lib/* 2>/dev/null |
  awk '$2 == "=>" && $3 ~ /^\// { print $3 }' | sort -u)
declare -A package_of
candidates() {
  local real
  real=$(readlink -f "$1")
  printf '%s\n' "$1" "$real" "${1#/usr}" "${real#/usr}"
}
while IFS= read -r line; do
  case "$line" in diversion*) continue ;; *": "/*) ;; *) continue ;; esac
  package_of[${line#*: }]=${line%%:*}
done < <(for so in "${libraries[@]}"; do candidates "$so"; done | sort -u |
         xargs -r dpkg -S 2>/dev/null || true)

packages=()
bundled=()
for so in "${libraries[@]}"; do
  package=""
  while read -r path; do
    package=${package_of[$path]:-}
    [ -z "$package" ] || break
  done < <(candidates "$so")
  if [ -n "$package" ]; then
    packages+=("$package")
  else
    # Under its soname, dereferenced.
    install -m 0644 "$(readlink -f "$so")" "$context/runtime/$(basename "$so")"
    bundled+=("$(basename "$so")")
  fi
done

echo "make-context: runtime packages: $(printf '%s\n' "${packages[@]}" | sort -u | tr '\n' ' ')"
[ ${#bundled[@]} -eq 0 ] || echo "make-context: bundled (no package): ${bundled[*]}"
echo "make-context: staged $(ls "$context/bin" | wc -l) binaries and $(ls "$context/lib" | wc -l) step libraries in $context"
