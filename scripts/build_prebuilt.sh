#!/usr/bin/env bash
# usage: scripts/build_prebuilt.sh      (NVCC=/path/to/nvcc ARCH=sm_90 to choose the compiler and target)
#
# Build, with nvcc, the prebuilt CUBINs that specs/prebuilt.yaml loads with `binary:`:
# the seed spec's v4 instance and the fast spec's v8 instance, for sm_90.
# The wrapper takes each template instance's address, which makes nvcc
# instantiate it for the device (the same approach as compiler: nvcc).
#
#   scripts/build_prebuilt.sh            # writes kernels/prebuilt/*.cubin
#   NVCC=/path/to/nvcc ARCH=sm_90 scripts/build_prebuilt.sh
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
nvcc="${NVCC:-nvcc}"
arch="${ARCH:-sm_90}"
out="$root/kernels/prebuilt"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
mkdir -p "$out"

build() {   # build NAME SOURCE INSTANCE
    local name="$1" source="$2" instance="$3"
    printf '#include "%s"\nstatic void* const instance = (void*)&%s;\n' "$source" "$instance" > "$work/$name.cu"
    "$nvcc" -cubin -arch="$arch" -O3 -std=c++17 -lineinfo -Xptxas -v -I"$root/kernels" \
        -o "$out/$name.cubin" "$work/$name.cu" 2>&1 | sed -n 's/^ptxas info *: Used/  '"$name"': used/p'
    echo "$out/$name.cubin"
}

"$nvcc" --version | tail -n 2
build v4_coarsen_2d_64x64x16_4x4_sm90 04_coarsen_2d.cu "sgemm_coarsen_2d<64, 64, 16, 4, 4>"
build v8_tuned_128x256x16_sm90 08_tuned.cu "sgemm_tuned<128, 256, 16, 64, 64, 16, 8, 3, 64, 1>"
