#!/usr/bin/env bash
# Installs the Debian 12 packages Cohort needs to build and test, and only
# those that are missing. Safe to run again. Uses sudo when not root.
# With arguments, installs those packages instead (the benchmarks' extras).
set -euo pipefail

packages=(
  g++ cmake ninja-build pkg-config git
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  libabsl-dev libspdlog-dev nlohmann-json3-dev libsystemd-dev
  libgtest-dev libgmock-dev libssl-dev zlib1g-dev
  openssl systemd   # TLS test certificates; systemd-analyze for the units
  iproute2 iptables util-linux   # test hosts: namespaces, bridge, tc, loss
  clang-14 libfuzzer-14-dev      # the fuzz targets (tools/fuzz.sh)
  libopenblas-dev dataset-fashion-mnist   # the Fashion-MNIST example
  libcpp-httplib-dev prometheus   # /metrics, and the server that scrapes it
  nodejs python3-yaml   # the Kubernetes manifests' schema and TF_CONFIG tests
  libfaketime   # an agent whose clock is off, for the job log test
)
# Debian's nodejs comes without npm; other builds of it (NodeSource) bring
# their own, which Debian's npm would conflict with.
if [ "$#" -eq 0 ] && ! command -v npm >/dev/null 2>&1; then packages+=(npm); fi
if [ "$#" -gt 0 ]; then packages=("$@"); fi

missing=()
for package in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$package")
  fi
done

if [ "${#missing[@]}" -eq 0 ]; then
  echo "setup: all ${#packages[@]} packages present"
  exit 0
fi

sudo=""
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null; then
    sudo="sudo"
  else
    echo "setup: missing packages (${missing[*]}), and not root without sudo" >&2
    exit 1
  fi
fi
echo "setup: installing ${missing[*]}"
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
echo "setup: done"
