#!/usr/bin/env bash
# Pack the sources probes/_fa3_one_level_build.py compiles: vLLM's FA-3 fork (hopper/ without the instantiations it
# does not build, csrc/common) at FORK_COMMIT and cutlass's include/ at the fork's submodule commit, from local mirrors.
# Usage: probes/pack_fa3_src.sh FORK_GIT_DIR CUTLASS_GIT_DIR OUT.tar.xz
set -euo pipefail
fork=${1:?fork git dir}; cutlass=${2:?cutlass git dir}; out=${3:?output .tar.xz}
FORK_COMMIT=803020a8fa15407871341d41eba4919ade2ee1ee   # the fork commit whose sources match the vLLM 0.24.0 wheel
CUTLASS_COMMIT=$(git -C "$fork" ls-tree "$FORK_COMMIT" csrc/cutlass | awk '{print $3}')
tmp=$(mktemp -d)
git -C "$fork" archive "$FORK_COMMIT" hopper csrc/common | tar x -C "$tmp"
find "$tmp/hopper/instantiations" -type f ! -name 'flash_fwd_hdim128_e4m3_packgqa_sm90.cu' \
  ! -name 'flash_fwd_hdim128_bf16_packgqa_sm90.cu' -delete
mkdir -p "$tmp/csrc/cutlass"
git -C "$cutlass" archive "$CUTLASS_COMMIT" include | tar x -C "$tmp/csrc/cutlass"
echo "fork $FORK_COMMIT cutlass $CUTLASS_COMMIT" > "$tmp/SOURCES.txt"
(cd "$tmp" && tar cf - .) | xz -T2 -6 > "$out"
rm -rf "$tmp"
ls -la "$out"
