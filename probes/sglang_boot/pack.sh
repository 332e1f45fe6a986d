#!/usr/bin/env bash
# Build the SGLang boot bundle for the H200 host (no registry there; each device call carries <= 64 MiB).
#
#   probes/sglang_boot/pack.sh [RELEASE]          RELEASE defaults to 0.5.17 (the only one with a pinned list here)
#
# It downloads the cp312 manylinux x86_64 wheels of SGLang, of its kernels (sglang-kernel, which also carries
# triton_kernels for gpt-oss's mxfp4 MoE) and of what an offline boot imports (versions pinned below: SGLang's own
# pins where it has them, else the versions the vLLM bundle uses), installs them with --no-deps into one site dir,
# keeps only the top-level packages that an import of the boot path loads (KEEP below: what
# probes/sglang_boot/selftest.py listed under python3.12 with a stub libcuda.so.1 and torch.cuda answering as an
# sm90 H200, importing sglang, the offline Engine, the scheduler, the model runner, the attention backends, every
# model class of cases.json and resolving every case's ServerArgs), trims what sm90 never loads, packs it as one xz
# tarball and splits that into pieces, one per folder (.boot-sgl is git-ignored):
#   .boot-sgl/p1/sglang-boot-RELEASE-part-aa, .boot-sgl/p2/sglang-boot-RELEASE-part-ab, ...
# The host already has torch 2.11 (cu130), triton 3.6, numpy, huggingface-hub 1.33, safetensors, regex, pyyaml,
# requests, tqdm, psutil, pillow, sentencepiece, tiktoken, einops, anyio, httpx, h11, aiohttp, uvloop, packaging,
# nvidia-ml-py, cuda-bindings and the nvidia-* CUDA 13 libraries: none of them is bundled. Its tokenizers (0.23.2)
# and transformers (5.17.0) are not what SGLang 0.5.17 pins (transformers==5.12.1, which refuses tokenizers >
# 0.23.0 at import): both travel.
# On the host: cat ~/stash/sglang-boot-RELEASE-part-* > x.tar.xz && tar xJf x.tar.xz -C /tmp/sgl-site (the probe
# sglang-boot does this itself, see probes/sglang_boot.py), then PYTHONPATH=/tmp/sgl-site ahead of the host's own.
# The tarball's top level is the site-packages contents (sglang/, each dependency, and the *.dist-info folders,
# since SGLang and transformers read versions through importlib.metadata).
#
# Environment: WORK (scratch, default /tmp/sglang-boot-RELEASE; wheels already in WORK/dl are not fetched again),
# PY312 (a python3.12, used for pip install --target so cp312 tags are accepted), PIECE_BYTES (default 44000000),
# XZ_THREADS (2), PRUNE_FATBIN (1: zero the non-sm90 device code, probes/vllm_boot/prune_fatbin.py).
set -euo pipefail
REL=${1:-0.5.17}
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(git -C "$HERE" rev-parse --show-toplevel)
WORK=${WORK:-/tmp/sglang-boot-$REL}
PY312=${PY312:-/root/.pyenv/versions/3.12.1/bin/python3.12}
PIECE_BYTES=${PIECE_BYTES:-44000000}
XZ_THREADS=${XZ_THREADS:-2}
PRUNE_FATBIN=${PRUNE_FATBIN:-1}

case $REL in
0.5.17)
  # sglang 0.5.17 pins: sglang-kernel==0.4.5, flashinfer_python==0.6.15.post1, xgrammar==0.2.1,
  # apache-tvm-ffi==0.1.11, transformers==5.12.1, openai==2.6.1 (its METADATA Requires-Dist).
  WHEELS=(
    sglang-kernel==0.4.5 flashinfer-python==0.6.15.post1 xgrammar==0.2.1 apache-tvm-ffi==0.1.11
    transformers==5.12.1 tokenizers==0.22.2 openai==2.6.1 distro==1.9.0 sniffio==1.3.1
    compressed-tensors==0.20.1 loguru==0.7.3 pydantic==2.14.4 pydantic-core==2.50.5 typing-inspection==0.4.5
    annotated-types==0.8.0 typing-extensions==4.16.0 fastapi==0.136.3 starlette==1.10.0 uvicorn==0.54.0
    orjson==3.13.0 msgspec==0.23.0 pyzmq==27.3.0 pybase64==1.5.1 partial-json-parser==0.2.1.1.post7
    setproctitle==1.3.8 dill==0.4.1 gguf==0.19.0 ipython==9.18.1 traitlets==5.16.1
  )
  # top-level names an import of the boot path loaded from the bundle (selftest.py's last lines), and their
  # dist-info folders; everything else the wheels installed is removed
  KEEP=(
    IPython annotated_types compressed_tensors dill distro fastapi flashinfer gguf loguru msgspec openai orjson
    partial_json_parser pybase64 pydantic pydantic_core setproctitle sgl_kernel sglang sniffio starlette
    tokenizers traitlets transformers triton_kernels tvm_ffi typing_extensions.py typing_inspection uvicorn
    xgrammar zmq pyzmq.libs
  )
  ;;
*)
  echo "no pinned wheel list for sglang $REL: find it as for 0.5.17 (see the header) and add a case" >&2
  exit 2
  ;;
esac

PLATFORMS=()
for v in 5 12 17 24 26 27 28 31 34 35; do PLATFORMS+=(--platform "manylinux_2_${v}_x86_64"); done
PLATFORMS+=(--platform manylinux2014_x86_64 --platform manylinux2010_x86_64 --platform manylinux1_x86_64)

mkdir -p "$WORK/dl"
echo "== download sglang==$REL and ${#WHEELS[@]} wheels into $WORK/dl"
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  "${PLATFORMS[@]}" --platform any -d "$WORK/dl" "sglang==$REL" "${WHEELS[@]}" 2>&1 | grep -v "is ignored" || true
n=$(ls "$WORK"/dl/*.whl | wc -l)
[ "$n" -eq $((${#WHEELS[@]} + 1)) ] || { echo "expected $((${#WHEELS[@]} + 1)) wheels in $WORK/dl, found $n" >&2; exit 1; }

SITE=$WORK/site
rm -rf "$SITE" && mkdir -p "$SITE"
echo "== install into $SITE"
"$PY312" -m pip install -q --no-deps --no-compile --no-index --target "$SITE" "$WORK"/dl/*.whl 2>&1 \
  | grep -v "root' user" || true
[ -d "$SITE/sglang" ] && [ -d "$SITE/sgl_kernel" ] || { echo "install failed" >&2; exit 1; }

echo "== keep ${#KEEP[@]} top-level packages"
keep_re="^($(IFS='|'; echo "${KEEP[*]}" | sed 's/\./\\./g'))$"
for entry in "$SITE"/*; do
  name=$(basename "$entry")
  case $name in *.dist-info) continue ;; esac
  echo "$name" | grep -Eq "$keep_re" || { echo "  drop $name"; rm -rf "$entry"; }
done
# a dist-info stays only where its package stays (importlib.metadata must not find a package that is gone)
for di in "$SITE"/*.dist-info; do
  tops=$(grep -v '^\.\.' "$di/RECORD" | cut -d, -f1 | cut -d/ -f1 | grep -v '\.dist-info$' | sort -u)
  alive=0
  for t in $tops; do [ -e "$SITE/$t" ] && alive=1; done
  [ "$alive" = 1 ] || { echo "  drop $(basename "$di")"; rm -rf "$di"; }
done

echo "== trim"
before=$(du -sb "$SITE" | cut -f1)
rm -rf "$SITE/bin" \
  "$SITE/sgl_kernel/sm100" \
  "$SITE/sglang/multimodal_gen"
find "$SITE" -name '*.a' -delete
find "$SITE" -type d \( -name tests -o -name __pycache__ \) -prune -exec rm -rf {} +
find "$SITE" -name '*.so*' -type f -exec strip --strip-debug {} \; 2>/dev/null || true
if [ "$PRUNE_FATBIN" = 1 ]; then
  find "$SITE/sgl_kernel" -name '*.so' -type f -print0 | xargs -0 python3 "$HERE/../vllm_boot/prune_fatbin.py" --arch 90
fi
echo "$REL" > "$SITE/sglang/KB_RELEASE"
after=$(du -sb "$SITE" | cut -f1)
echo "site: $before B -> $after B"

echo "== pack (xz -T$XZ_THREADS -9)"
TAR=$WORK/sglang-boot-$REL.tar.xz
(cd "$SITE" && LC_ALL=C ls -A | LC_ALL=C sort) > "$WORK/toplevel.txt"
(cd "$SITE" && tar cf - --sort=name --owner=0 --group=0 --numeric-owner --mtime=2020-01-01 \
  -T "$WORK/toplevel.txt") | xz -T"$XZ_THREADS" -9 > "$TAR"
ls -l "$TAR"

echo "== split into pieces of at most $PIECE_BYTES B"
rm -rf "$WORK/pieces" "$ROOT/.boot-sgl"/p[0-9]*
mkdir -p "$WORK/pieces"
split -b "$PIECE_BYTES" -a 2 "$TAR" "$WORK/pieces/sglang-boot-$REL-part-"
i=0
for piece in "$WORK"/pieces/sglang-boot-"$REL"-part-*; do
  i=$((i + 1))
  mkdir -p "$ROOT/.boot-sgl/p$i"
  mv "$piece" "$ROOT/.boot-sgl/p$i/"
done
(cd "$ROOT" && ls -l .boot-sgl/p*/)
sha256sum "$TAR" | tee "$ROOT/.boot-sgl/sglang-boot-$REL.sha256"
echo "$i pieces; on the host: cat ~/stash/sglang-boot-$REL-part-* > x.tar.xz && tar xJf x.tar.xz -C /tmp/sgl-site"
