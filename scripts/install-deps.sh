#!/usr/bin/env bash
# Installs every build and test dependency of Kiln from Debian 12 packages.
# Idempotent: packages already present are skipped, so a second run is quick.
set -euo pipefail

packages=(
  build-essential cmake ninja-build ccache pkg-config git python3 python3-numpy
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler libabsl-dev libssl-dev
  llvm-19-dev lld-19 liblld-19-dev libzstd-dev zlib1g-dev libedit-dev libxml2-dev libcurl4-openssl-dev
  libsqlite3-dev nlohmann-json3-dev libspdlog-dev libfmt-dev libgtest-dev libgmock-dev
  libonnx-dev libonnx-testdata python3-onnx libdlpack-dev python3-yaml clang-format
  python3-torch python3-torchvision
  # OpenBLAS: artifacts of targets with libraries=openblas load libopenblas.so.0, and the
  # bench compares with it.
  libopenblas-dev libopenblas0-pthread
  # oneDNN: artifacts of targets with libraries=dnnl load libdnnl.so.2 (no header needed).
  libdnnl2
  # Backends other than x86_64: cross toolchains build kiln-runner for aarch64 and riscv64,
  # qemu-user runs it; wasm32 artifacts run in Node.js and headless Chromium.
  g++-aarch64-linux-gnu g++-riscv64-linux-gnu qemu-user nodejs chromium
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages present"
  exit 0
fi

echo "install-deps: installing ${missing[*]}"
sudo_cmd=()
[ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo)
export DEBIAN_FRONTEND=noninteractive
"${sudo_cmd[@]}" apt-get update -qq
"${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
