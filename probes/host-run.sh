#!/usr/bin/env bash
# Run kb probes on a GPU host that cannot reach a package registry; the wheels travel with the checkout
# (see ../shared/gpu/fetch-wheels.sh). Usage, from the repository root:
#   probes/host-run.sh OUT [kb probe run options]     e.g. probes/host-run.sh $OUT --all --write
# Expects: .whl/ (FlashInfer and what it needs), .whl-kb/ (kb's own dependencies for the host's Python),
# .whl-fa4u/ (flash-attn-4, quack, torch-c-dlpack-ext) and the CuTe DSL CUDA libraries as
# cutlass-dsl-cu12.tar.xz in ~/stash/ (or split into parts ~/stash/cdsl-part-*). Installs into /tmp/site once.
set -uo pipefail
out=${1:?usage: probes/host-run.sh OUT [kb probe run options]}; shift
site=/tmp/site
pipi() { python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$site" "$@"; }
if [ ! -f "$site/.kb-installed" ]; then
  pipi .whl/*.whl .whl-kb/*.whl || exit 1
  if ls .whl-fa4u/*.whl >/dev/null 2>&1; then pipi .whl-fa4u/*.whl || exit 1; fi
  if ls ~/stash/cdsl-part-* >/dev/null 2>&1; then cat ~/stash/cdsl-part-* > ~/stash/cutlass-dsl-cu12.tar.xz; fi
  if [ -f ~/stash/cutlass-dsl-cu12.tar.xz ]; then tar xJf ~/stash/cutlass-dsl-cu12.tar.xz -C "$site" || exit 1; fi
  touch "$site/.kb-installed"
fi
export PYTHONPATH="$site:$site/nvidia_cutlass_dsl/dsl_packages:$PWD"
# Triton's tutorial kernel, where probes/fetch-tutorial.sh put it (an ignored folder that travels in the carry list)
if [ -f .tutorial/fused_attention_tutorial.py ]; then PYTHONPATH="$PWD/.tutorial:$PYTHONPATH"; fi
export MAX_JOBS=${MAX_JOBS:-$(nproc)} PYTHONUNBUFFERED=1
mkdir -p "$out"
python3 -m kbtool probe run --out "$out" "$@"
