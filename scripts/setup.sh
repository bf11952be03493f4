#!/usr/bin/env bash
# Installs the Debian packages tensorc needs to build and test (run as root or
# with sudo). Safe to run again: apt-get skips what is already installed.
set -euo pipefail

packages=(
  build-essential cmake ninja-build git python3 python3-numpy
  python3-dev  # headers for the Python binding's fast path (python/tensorc/_fast.c; optional)
  libopenblas-dev libbenchmark-dev
  llvm-19-dev libmlir-19-dev mlir-19-tools llvm-19-tools
  nlohmann-json3-dev libcli11-dev libgtest-dev
  clang-19 libfuzzer-19-dev libclang-rt-19-dev
  libsqlite3-0
  zlib1g-dev libncurses-dev  # static zlib and terminfo for scripts/portable-compiler.sh
  python3-torch  # the PyTorch exporter's tests (python/tensorc/torch; PyTorch 1.13, CPU)
  python3-torchvision  # torchvision's models for the model suite's CPU subset (bench/models, test/python)
  openmpi-bin  # mpirun and Open MPI (the runtime dlopens libmpi.so.40): SPMD programs on the CPU
)

sudo_cmd=()
if [ "$(id -u)" -ne 0 ]; then sudo_cmd=(sudo); fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p")
done

if [ "${#missing[@]}" -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  "${sudo_cmd[@]}" apt-get update -q
  "${sudo_cmd[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}"
else
  echo "setup: all packages present"
fi
