#!/usr/bin/env bash
# Run kb probes on a GPU host that cannot reach a package registry; the packages travel with the checkout.
# Usage, from the repository root:
#   probes/host-run.sh stash DIR               copy DIR's files to ~/stash/ (for what is too big for one call)
#   probes/host-run.sh OUT [kb probe run ...]  install, then `kb probe run --out OUT ...`  e.g. $OUT --all --write
# What it installs into /tmp/site, once per machine:
#   - every wheel in the carried folders .whl-run/ and .whl/ (kb's own needs the host lacks, FlashInfer's needs,
#     flash-attn-4 and quack; see CONTRIBUTING.md "Probes on the H200");
#   - every ~/stash/*.tar.xz and carried .whl-vk*/*.tar.xz unpacked into /tmp/site (a recompressed FlashInfer wheel,
#     the CuTe DSL CUDA libraries, vLLM's kernels without vLLM, whose release goes to vllm/KB_RELEASE), after joining split files ~/stash/NAME-part-* into ~/stash/NAME.tar.xz;
#     ~/stash/sglang-boot-*.tar.xz is joined but not unpacked here (the sglang-boot probe puts it in /tmp/sgl-site).
# A device call carries at most 64 MiB with the checkout, so the big archives go in earlier calls with
# `stash`; the machine keeps ~/stash while warm (30 s after a call).
set -uo pipefail
if [ "${1:-}" = stash ]; then
  mkdir -p ~/stash && cp "${2:?usage: probes/host-run.sh stash DIR}"/* ~/stash/ && ls -la ~/stash
  exit
fi
out=${1:?usage: probes/host-run.sh OUT [kb probe run options]}; shift
site=/tmp/site
if [ ! -f "$site/.kb-installed" ]; then
  wheels=$(ls .whl-run/*.whl .whl/*.whl 2>/dev/null)
  if [ -n "$wheels" ]; then
    # shellcheck disable=SC2086
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$site" $wheels \
      || exit 1
  fi
  for first in ~/stash/*-part-aa; do
    [ -e "$first" ] || continue
    name=${first%-part-aa}
    cat "$name"-part-* > "$name.tar.xz" && rm "$name"-part-*
  done
  for archive in ~/stash/*.tar.xz .whl-vk*/*.tar.xz; do
    [ -e "$archive" ] || continue
    case $(basename "$archive") in  # the SGLang bundle (probes/sglang_boot/pack.sh) lives apart: the probe
      sglang-boot-*) continue ;;    # sglang-boot unpacks it into /tmp/sgl-site, on the boots' path only
    esac
    tar xJf "$archive" -C "$site" || exit 1
    # vLLM's kernels without vLLM (../shared/gpu/fetch-wheels.sh --vllm-kernels): name the release they came from
    case $(basename "$archive") in
      vllm-kernels-*.tar.xz|vllm-fa2-*.tar.xz)
        release=$(basename "$archive" .tar.xz); echo "${release##*-}" > "$site/vllm/KB_RELEASE" ;;
    esac
  done
  touch "$site/.kb-installed"
fi
export PYTHONPATH="$site:$site/nvidia_cutlass_dsl/dsl_packages:$PWD${PYTHONPATH:+:$PYTHONPATH}"
# Triton's tutorial kernel, where probes/fetch-tutorial.sh put it (an ignored folder that travels in the carry list)
if [ -f .tutorial/fused_attention_tutorial.py ]; then PYTHONPATH="$PWD/.tutorial:$PYTHONPATH"; fi
export MAX_JOBS=${MAX_JOBS:-$(nproc)} PYTHONUNBUFFERED=1
mkdir -p "$out"
python3 -m kbtool probe run --out "$out" "$@"
