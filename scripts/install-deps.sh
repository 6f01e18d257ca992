#!/usr/bin/env bash
# Installs autoddl's build and test dependencies from Debian's packages, only those missing.
# Idempotent: a second run installs nothing. CUDA 13 + NCCL are expected at /usr/local/cuda (optional).
set -euo pipefail

packages=(
  cmake ninja-build ccache g++ clang lld libclang-rt-14-dev
  llvm-19-dev libmlir-19-dev mlir-19-tools llvm-19-tools
  nlohmann-json3-dev libcli11-dev libfmt-dev libgtest-dev
  libopenmpi-dev openmpi-bin libopenblas-dev zlib1g-dev
  libonnx-dev libonnx-testdata libprotobuf-dev protobuf-compiler
  python3
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
[ "$(id -u)" -ne 0 ] && sudo_cmd=(sudo)
export DEBIAN_FRONTEND=noninteractive
"${sudo_cmd[@]}" apt-get update -qq
"${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
