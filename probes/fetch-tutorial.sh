#!/usr/bin/env bash
# Put Triton's fused-attention tutorial (python/tutorials/06-fused-attention.py, not shipped in the triton wheel) in
# the ignored folder .tutorial/ as fused_attention_tutorial.py, for the triton-tutorial probe. Never commit it.
# Usage, from the repository root:
#   probes/fetch-tutorial.sh                 download the file at tag $TRITON_TAG (default v3.6.0, the release tested)
#   probes/fetch-tutorial.sh FILE [SOURCE]   use a copy you already have (say one read with kb's read_file tool
#                                            from triton-lang/triton); SOURCE names where it came from
# Then carry `.tutorial` to the probe host (the run's carry list); probes/host-run.sh puts it on PYTHONPATH, or
# run `PYTHONPATH=$PWD/.tutorial:$PYTHONPATH python3 -m kbtool probe run ...`.
set -euo pipefail
tag=${TRITON_TAG:-v3.6.0}
dest=.tutorial
mkdir -p "$dest"
if [ $# -ge 1 ]; then
  cp "$1" "$dest/fused_attention_tutorial.py"
  echo "${2:-local copy of $1}" > "$dest/SOURCE"
else
  url="https://raw.githubusercontent.com/triton-lang/triton/$tag/python/tutorials/06-fused-attention.py"
  if ! curl -fsSL --max-time 30 "$url" -o "$dest/fused_attention_tutorial.py"; then
    echo "could not download $url; give a copy instead: probes/fetch-tutorial.sh FILE SOURCE" >&2
    exit 1
  fi
  echo "triton-lang/triton $tag python/tutorials/06-fused-attention.py" > "$dest/SOURCE"
fi
echo "$dest/fused_attention_tutorial.py <- $(cat "$dest/SOURCE")"
