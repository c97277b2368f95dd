#!/usr/bin/env bash
# Builds the PTX of the copy kernels into the resources, with a header that records the source's SHA-256 and
# the nvcc that made it; PtxMatchesSourceTest checks both. Run after changing kv_transfer.cu, and commit the PTX.
#
# PTX for compute_80 runs on Ampere, Hopper and later: the driver compiles it at load. A copy kernel gains
# nothing from newer instructions, and the driver must be at least as new as this nvcc (CUDA 13.0 here).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=$here/../resources/io/hicache/cuda/kv_transfer.ptx
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
nvcc -ptx -arch=compute_80 -O3 -o "$tmp/kv_transfer.ptx" "$here/kv_transfer.cu"
{
  echo "// hicache-ptx source-sha256 $(sha256sum "$here/kv_transfer.cu" | cut -d' ' -f1)"
  echo "// hicache-ptx nvcc $(nvcc --version | grep -o 'release [0-9.]*, V[0-9.]*')"
  cat "$tmp/kv_transfer.ptx"
} > "$out"
echo "wrote $out"
