#!/usr/bin/env bash
# Run `kb bench run` on a GPU host that cannot reach a package registry; the wheels travel with the checkout
# (same layout as probes/host-run.sh). Usage, from the repository root:
#   bash kbtool/bench/host-run.sh OUT [kb bench run options]        e.g. ... $OUT --quick
# Records and PNGs go to OUT/measurements; copy them into records/measurements/ and commit.
# Expects .whl/ (FlashInfer and its needs) and .whl-kb/ (kb's dependencies); FA-4 from .whl-fa4u/ (or the
# three FA-4-only wheels of .whl-fa4/) plus the CuTe DSL CUDA libraries in ~/stash, when present.
set -uo pipefail
out=${1:?usage: kbtool/bench/host-run.sh OUT [kb bench run options]}; shift
site=/tmp/site
pipi() { python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$site" "$@"; }
if [ ! -f "$site/.kb-installed" ]; then
  pipi .whl/*.whl .whl-kb/*.whl || exit 1
  if ls .whl-fa4u/*.whl >/dev/null 2>&1; then pipi .whl-fa4u/*.whl || exit 1
  elif ls .whl-fa4/flash_attn_4-*.whl >/dev/null 2>&1; then
    pipi .whl-fa4/flash_attn_4-*.whl .whl-fa4/quack_kernels-*.whl .whl-fa4/torch_c_dlpack_ext-*.whl || exit 1
  fi
  if ls ~/stash/cdsl-part-* >/dev/null 2>&1; then cat ~/stash/cdsl-part-* > ~/stash/cutlass-dsl-cu12.tar.xz; fi
  if [ -f ~/stash/cutlass-dsl-cu12.tar.xz ]; then tar xJf ~/stash/cutlass-dsl-cu12.tar.xz -C "$site" || exit 1; fi
  touch "$site/.kb-installed"
fi
export PYTHONPATH="$site:$site/nvidia_cutlass_dsl/dsl_packages:$PWD"
export MAX_JOBS=${MAX_JOBS:-$(nproc)} PYTHONUNBUFFERED=1 FLASH_ATTENTION_CUTE_DSL_CACHE_ENABLED=1
mkdir -p "$out/measurements"
python3 -m kbtool bench run --out "$out/measurements" "$@"
