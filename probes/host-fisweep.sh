#!/usr/bin/env bash
# Run the FlashInfer probes once per FlashInfer release on a GPU host with no registry (issue 28's sweep).
#   probes/host-fisweep.sh OUT BUDGET_S PROBE RELEASE ...
# Needs, in this call's carry (.fisweep/, git-ignored) or from earlier calls (~/stash/): the bundle
# fi-*.tar.xz (probes/fi_sweep/pack.py), and FlashInfer's and kb's needs either as hostsite.tar.xz (a folder
# `hostsite/` made here by `pip install --no-deps --target hostsite --python-version 3.12 --only-binary=:all:
# --platform manylinux_2_28_x86_64 ... WHEELS`, xz-compressed: 2x smaller than the wheels) or as wheels in
# .whl/, .whl-run/ and ~/stash/*.whl. Each release gets its own site folder
# (/tmp/fi/RELEASE, first on PYTHONPATH) and JIT workspace, and runs concurrently with the others; the run's
# budget (kb probe run --budget-s) bounds each, and OUT/RELEASE/ holds its evidence and probe-run.json.
set -uo pipefail
out=${1:?OUT}; budget=${2:?BUDGET_S}; probe=${3:?PROBE}; shift 3
site=/tmp/site
if [ ! -f "$site/.kb-installed" ] && [ -f .fisweep/hostsite.tar.xz ]; then
  tar xJf .fisweep/hostsite.tar.xz -C /tmp && rm -rf "$site" && mv /tmp/hostsite "$site" && touch "$site/.kb-installed"
fi
if [ ! -f "$site/.kb-installed" ]; then
  # shellcheck disable=SC2046
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$site" \
    $(ls .whl-run/*.whl .whl/*.whl ~/stash/*.whl 2>/dev/null) || exit 1
  touch "$site/.kb-installed"
fi
for bundle in .fisweep/fi-*.tar.xz ~/stash/fi-*.tar.xz; do
  [ -e "$bundle" ] || continue
  rm -rf /tmp/fi-bundle && mkdir -p /tmp/fi-bundle && tar xJf "$bundle" -C /tmp/fi-bundle || exit 1
  python3 probes/fi_sweep/restore.py /tmp/fi-bundle/blob /tmp/fi || exit 1
done
for rel in "$@"; do [ -d "/tmp/fi/$rel" ] || { echo "no bundle holds flashinfer $rel" >&2; exit 2; }; done
jobs=$(( $(nproc) * 3 / 2 / $# )); [ "$jobs" -ge 2 ] || jobs=2
for rel in "$@"; do
  mkdir -p "$out/$rel" "/tmp/fiws/$rel"
  PYTHONPATH="/tmp/fi/$rel:$site:$PWD" MAX_JOBS=$jobs PYTHONUNBUFFERED=1 FLASHINFER_WORKSPACE_BASE="/tmp/fiws/$rel" \
    python3 -m kbtool probe run --out "$out/$rel" --probe "$probe" --budget-s "$budget" > "$out/$rel/run.log" 2>&1 &
done
wait
for rel in "$@"; do
  echo "== flashinfer $rel"; tail -n 25 "$out/$rel/run.log"
  python3 - "$out/$rel" <<'PY'
import collections, glob, sys
import yaml
for path in glob.glob(sys.argv[1] + "/*.yaml"):
    doc = yaml.safe_load(open(path))
    seen = collections.Counter(c["outcome"] for c in doc.get("cases", []))
    print(path.split("/")[-1], doc["environment"]["libraries"].get("flashinfer"), dict(seen))
PY
done
