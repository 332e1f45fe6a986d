#!/usr/bin/env bash
# Build the vLLM boot bundle for the H200 host (no registry there; each device call carries <= 64 MiB).
#
#   probes/vllm_boot/pack.sh [RELEASE]          RELEASE defaults to 0.24.0 (pinned lists here: 0.24.0, 0.25.1, 0.26.0; each pins the host's torch 2.11)
#
# It downloads the cp312 manylinux x86_64 wheels of vLLM and of what `LLM(..., load_format="dummy",
# skip_tokenizer_init=True)` imports at start-up (versions pinned below: one pip resolution of vllm==0.24.0,
# reduced to the modules an import of the offline path loads, found under python3.12 with a stub libcuda.so.1
# and vLLM's NonNvmlCudaPlatform forced to cc 9.0), installs them with --no-deps into one site dir, trims what
# sm90 never loads, packs it as one xz tarball and splits that into pieces, one per folder:
#   .boot/p1/vllm-boot-RELEASE-part-aa, .boot/p2/vllm-boot-RELEASE-part-ab, ...      (.boot is git-ignored)
# The host already has torch 2.11 (cu130), triton, numpy, ninja, einops, requests, tqdm, click, packaging,
# protobuf, nvidia-ml-py, cuda-bindings and the nvidia-* CUDA libraries: none of them is bundled.
# On the host: cat ~/stash/vllm-boot-RELEASE-part-* > x.tar.xz && tar xJf x.tar.xz -C /tmp/site, and run with
# PYTHONPATH=/tmp/site. The tarball's top level is the site-packages contents (vllm/, each dependency, and the
# *.dist-info folders, since vLLM reads some versions through importlib.metadata).
#
# Environment: WORK (scratch, default /tmp/vllm-boot-RELEASE), PY312 (a python3.12, used for pip install
# --target so cp312 tags are accepted), PIECE_BYTES (default 17000000: a device call carries the checkout,
# about 43 MB on disk as the device tool counts it (whole 4 KiB blocks) since the superseded selector grids and the
# multimodal model folders, plus the piece and .whl-run (4 MB), within 64 MiB), XZ_THREADS (2), PRUNE_FATBIN (1: zero the
# non-sm90 device code, see prune_fatbin.py; 0 keeps it and the bundle grows by about 90 MB).
set -euo pipefail
REL=${1:-0.24.0}
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(git -C "$HERE" rev-parse --show-toplevel)
WORK=${WORK:-/tmp/vllm-boot-$REL}
PY312=${PY312:-/root/.pyenv/versions/3.12.1/bin/python3.12}
PIECE_BYTES=${PIECE_BYTES:-17000000}
XZ_THREADS=${XZ_THREADS:-2}
PRUNE_FATBIN=${PRUNE_FATBIN:-1}

# 54 wheels besides vllm itself (pip's resolution of vllm==0.24.0 for cp312, these versions; 0.26.0 adds torchvision).
# typing_extensions: pydantic 2.14 needs >= 4.16, which the host's copy may not be.
WHEELS=(
  aiohappyeyeballs==2.7.1 aiohttp==3.14.5 aiosignal==1.4.0 annotated-doc==0.0.7 annotated-types==0.8.0
  anyio==4.16.0 apache-tvm-ffi==0.1.9 astor==0.8.1 attrs==26.1.0 blake3==1.0.11 cachetools==8.0.2
  cbor2==6.3.0 certifi==2026.10.19.post1 cloudpickle==3.1.3 compressed-tensors==0.17.0 depyf==0.20.0
  dill==0.4.1 fastapi==0.136.3 frozenlist==1.8.0 h11==0.16.0 httpcore2==2.16.2 httpx2==2.16.2
  huggingface-hub==2.4.0 idna==3.20 llguidance==1.7.6 loguru==0.7.3 msgspec==0.23.0 multidict==7.2.1
  openai==3.57.0 openai-harmony==0.0.8 partial-json-parser==0.2.1.1.post7 pillow==13.0.0
  prometheus-client==0.26.0 propcache==0.5.4 psutil==7.2.2 py-cpuinfo==9.0.0 pybase64==1.5.1
  pydantic==2.14.4 pydantic-core==2.50.5 pyyaml==6.0.4 pyzmq==27.3.0 regex==2026.11.19 safetensors==0.8.0
  setproctitle==1.3.8 sniffio==1.3.1 starlette==1.10.0 tokenizers==0.23.3 transformers==5.24.0
  truststore==0.10.5 typing-extensions==4.16.0 typing-inspection==0.4.5 uvloop==0.23.0 xgrammar==0.2.3
  yarl==1.25.1
)
case $REL in
0.24.0) ;;
0.25.1)
  # 0.24.0's list (0.25.1 pins the same apache-tvm-ffi 0.1.9 and torch 2.11) with torchvision 0.26.0, which it pins too
  WHEELS+=(torchvision==0.26.0)
  ;;
0.26.0)
  # 0.24.0's list with the three versions 0.26.0's resolution moved; its new requirements (nvtx, torchcodec,
  # cutlass DSL) are not imported on the offline dummy-weight path.
  WHEELS=("${WHEELS[@]/#apache-tvm-ffi==0.1.9/apache-tvm-ffi==0.1.10}")
  WHEELS=("${WHEELS[@]/#cachetools==8.0.2/cachetools==8.0.3}")
  WHEELS=("${WHEELS[@]/#xgrammar==0.2.3/xgrammar==0.2.7}")
  # torchvision (vLLM 0.26.0 pins 0.26.0, which pins torch 2.11, the host's): the multimodal cases need it, since
  # transformers 5.24 builds Qwen3-VL's video processor only with torchvision (video_processing_utils.py
  # BaseVideoProcessor @requires torchvision; without it AutoProcessor raises ImportError at start-up, Gemma 3 falls
  # back to its PIL image processor); the host's package list names none. 7.5 MB as a wheel.
  WHEELS+=(torchvision==0.26.0)
  ;;
*)
  echo "no pinned wheel list for vllm $REL: find it as for 0.24.0 (see the header) and add a case" >&2
  exit 2
  ;;
esac

PLATFORMS=()
for v in 5 12 17 24 26 27 28 31 34 35; do PLATFORMS+=(--platform "manylinux_2_${v}_x86_64"); done
PLATFORMS+=(--platform manylinux2014_x86_64 --platform manylinux2010_x86_64 --platform manylinux1_x86_64)

mkdir -p "$WORK/dl"
echo "== download vllm==$REL and ${#WHEELS[@]} wheels into $WORK/dl"
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  "${PLATFORMS[@]}" --platform any -d "$WORK/dl" "vllm==$REL" "${WHEELS[@]}" 2>&1 | grep -v "is ignored" || true
n=$(ls "$WORK"/dl/*.whl | wc -l)
[ "$n" -eq $((${#WHEELS[@]} + 1)) ] || { echo "expected $((${#WHEELS[@]} + 1)) wheels in $WORK/dl, found $n" >&2; exit 1; }

SITE=$WORK/site
rm -rf "$SITE" && mkdir -p "$SITE"
echo "== install into $SITE"
if [ -x "$PY312" ]; then
  "$PY312" -m pip install -q --no-deps --no-compile --no-index --target "$SITE" "$WORK"/dl/*.whl 2>&1 \
    | grep -v "root' user" || true
else  # a wheel is a zip; none of these carries a .data folder that matters for import
  for w in "$WORK"/dl/*.whl; do python3 -m zipfile -e "$w" "$SITE"; done
fi
[ -d "$SITE/vllm" ] || { echo "install failed" >&2; exit 1; }

echo "== trim"
before=$(du -sb "$SITE" | cut -f1)
rm -rf "$SITE/bin" \
  "$SITE/vllm/vllm_flash_attn/_vllm_fa2_C.abi3.so" \
  "$SITE/vllm/vllm-rs" \
  "$SITE/vllm/third_party/fmha_sm100" \
  "$SITE/vllm/entrypoints/serve/instrumentator/static"
# deep_gemm ships _C for every CPython; the host runs 3.12 (its include/ stays: DeepGEMM JIT-compiles on sm90)
find "$SITE/vllm/third_party/deep_gemm" -maxdepth 1 -name '_C.cpython-*.so' ! -name '_C.cpython-312-*' -delete
find "$SITE" -name '*.a' -delete
find "$SITE" -type d \( -name tests -o -name __pycache__ \) -prune -exec rm -rf {} +
find "$SITE" -name '*.so*' -type f -exec strip --strip-debug {} \; 2>/dev/null || true
if [ "$PRUNE_FATBIN" = 1 ]; then
  find "$SITE/vllm" -name '*.so' -type f -print0 | xargs -0 python3 "$HERE/prune_fatbin.py" --arch 90
fi
after=$(du -sb "$SITE" | cut -f1)
echo "site: $before B -> $after B"

echo "== pack (xz -T$XZ_THREADS -9)"
TAR=$WORK/vllm-boot-$REL.tar.xz
(cd "$SITE" && LC_ALL=C ls -A | LC_ALL=C sort) > "$WORK/toplevel.txt"
(cd "$SITE" && tar cf - --sort=name --owner=0 --group=0 --numeric-owner --mtime=2020-01-01 \
  -T "$WORK/toplevel.txt") | xz -T"$XZ_THREADS" -9 > "$TAR"
ls -l "$TAR"

echo "== split into pieces of at most $PIECE_BYTES B"
rm -rf "$WORK/pieces" "$ROOT/.boot"/p[0-9]*
mkdir -p "$WORK/pieces"
split -b "$PIECE_BYTES" -a 2 "$TAR" "$WORK/pieces/vllm-boot-$REL-part-"
i=0
for piece in "$WORK"/pieces/vllm-boot-"$REL"-part-*; do
  i=$((i + 1))
  mkdir -p "$ROOT/.boot/p$i"
  mv "$piece" "$ROOT/.boot/p$i/"
done
(cd "$ROOT" && ls -l .boot/p*/)
sha256sum "$TAR" | tee "$ROOT/.boot/vllm-boot-$REL.sha256"
echo "$i pieces; on the host: cat ~/stash/vllm-boot-$REL-part-* > x.tar.xz && tar xJf x.tar.xz -C /tmp/site"
