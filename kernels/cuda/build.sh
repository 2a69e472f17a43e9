#!/usr/bin/env bash
# Builds the CUDA flash-attention kernel (flash_attn.cu) into
# $OUT_DIR/libsemroute_flash_cuda.so (default: target/cuda under the
# workspace) where nvcc exists; prints a note and exits 0 where it does not,
# so that CPU-only machines build and test everything else unchanged.
#
#   NVCC=/path/to/nvcc   compiler (default: nvcc on PATH, then $CUDA_HOME/bin)
#   CUDA_ARCHS="80 90"   compute capabilities (sm_80 or newer: bf16 tensor cores
#                        and more than 48 KB of shared memory per block)
#
# STATUS: not built or run on a GPU yet; see validate_sdpa.py.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
nvcc="${NVCC:-}"
if [[ -z "$nvcc" ]]; then
  nvcc="$(command -v nvcc || true)"
fi
if [[ -z "$nvcc" ]]; then
  for home in "${CUDA_HOME:-}" "${CUDA_PATH:-}" /usr/local/cuda; do
    if [[ -n "$home" && -x "$home/bin/nvcc" ]]; then
      nvcc="$home/bin/nvcc"
      break
    fi
  done
fi
if [[ -z "$nvcc" ]]; then
  echo "build.sh: nvcc not found: CUDA flash attention not built (the CPU kernel is unaffected)"
  exit 0
fi

out="${OUT_DIR:-$here/../../target/cuda}"
mkdir -p "$out"
gencode=()
for arch in ${CUDA_ARCHS:-80 86 89 90}; do
  gencode+=("-gencode=arch=compute_${arch},code=sm_${arch}")
done
last_arch="${CUDA_ARCHS:-80 86 89 90}"
last_arch="${last_arch##* }"
gencode+=("-gencode=arch=compute_${last_arch},code=compute_${last_arch}")

set -x
"$nvcc" -O3 -std=c++17 --shared -Xcompiler -fPIC "${gencode[@]}" \
  -o "$out/libsemroute_flash_cuda.so" "$here/flash_attn.cu"
