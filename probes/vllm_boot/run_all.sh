#!/usr/bin/env bash
# Boot vLLM once per case, each in a fresh process, on the GPU host.
#
#   probes/vllm_boot/run_all.sh OUTDIR [CASES_JSON]       CASES_JSON defaults to probes/vllm_boot/cases.json
#
# Writes OUTDIR/<case-id>.json (boot_case.py's record) and OUTDIR/logs/<case-id>.log (its stdout+stderr), prints
# one table row per case, and appends every record to OUTDIR/results.jsonl. Cases run in file order.
# Time: no case starts once BOOT_BUDGET_S (default 540) seconds have passed since this script started, and
# each case's timeout (its timeout_s, default 150) is cut to end by BOOT_DEADLINE_S (default 585), so the
# command ends within 10 minutes. A case killed by its timeout is recorded with outcome TIMEOUT.
# Other environment: BOOT_FROM (1-based index of the first case to run, default 1), BOOT_ONLY (comma-separated
# case ids), BOOT_SITE (default /tmp/site), BOOT_PACK_TO (a folder, e.g. $OUT: at the end results.jsonl,
# table.txt and boot-logs.tar.xz are copied there; a device call brings back at most 8 files).
# If BOOT_SITE has no vllm yet and ~/stash holds the bundle's pieces (probes/vllm_boot/pack.sh), they are joined
# and unpacked there first: cat ~/stash/vllm-boot-*-part-* > x.tar.xz; tar xJf x.tar.xz -C BOOT_SITE.
set -uo pipefail
START=$(date +%s)
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
OUTDIR=${1:?usage: run_all.sh OUTDIR [CASES_JSON]}
CASES=${2:-$HERE/cases.json}
BUDGET=${BOOT_BUDGET_S:-540}
DEADLINE=${BOOT_DEADLINE_S:-585}
FROM=${BOOT_FROM:-1}
ONLY=${BOOT_ONLY:-}
SITE=${BOOT_SITE:-/tmp/site}
mkdir -p "$OUTDIR/logs" "$OUTDIR/cases"

if [ ! -f "$SITE/vllm/__init__.py" ]; then
  first=$(ls ~/stash/vllm-boot-*-part-aa 2>/dev/null | head -1)
  if [ -n "$first" ]; then
    name=${first%-part-aa}
    echo "unpacking $(ls "$name"-part-* | wc -l) pieces of $(basename "$name") into $SITE"
    mkdir -p "$SITE" && cat "$name"-part-* > /tmp/vllm-boot.tar.xz && tar xJf /tmp/vllm-boot.tar.xz -C "$SITE" \
      && rm -f /tmp/vllm-boot.tar.xz || { echo "unpack failed" >&2; exit 1; }
  else
    echo "no vllm in $SITE and no ~/stash/vllm-boot-*-part-aa: stash the pieces first" >&2
    exit 1
  fi
fi
export PYTHONPATH="$SITE${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
echo "setup took $(( $(date +%s) - START )) s; $(python3 -c 'import sys; print(sys.version.split()[0])') \
$(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>/dev/null | head -1)"

# one case per line: index, id, timeout, file with the case
python3 - "$CASES" "$OUTDIR/cases" "$FROM" "$ONLY" > "$OUTDIR/cases/index.tsv" <<'EOF'
import json, sys
cases, d, start, only = json.load(open(sys.argv[1])), sys.argv[2], int(sys.argv[3]), sys.argv[4]
keep = set(only.split(",")) if only else None
for i, c in enumerate(cases, 1):
    if i < start or (keep and c["id"] not in keep):
        continue
    p = f"{d}/{c['id']}.case.json"
    json.dump(c, open(p, "w"))
    print(f"{i}\t{c['id']}\t{c.get('timeout_s', 150)}\t{p}")
EOF

row() {  # one short line from a result record
  python3 - "$1" <<'EOF'
import json, sys
r = json.load(open(sys.argv[1])); s = r.get("summary", {})
def g(k, f="{}"):
    v = s.get(k)
    return "-" if v is None else (f.format(v) if not isinstance(v, list) else ",".join(map(str, v)))
ex = r.get("exception") or {}
tail = f"  {ex.get('type', '')}: {ex.get('message', '')[:110]}" if r.get("outcome") != "OK" else ""
print(f"{r.get('outcome', '?'):11s} {r.get('wall_s', 0):6.1f}s  {g('attention_backend'):14s} fa{g('flash_attn_version'):2s}"
      f" w{g('weights_gib', '{:.2f}'):>6s} act{g('activation_peak_gib', '{:.2f}'):>5s} nt{g('non_torch_gib', '{:.2f}'):>5s}"
      f" cg{g('cudagraph_estimate_gib', '{:.2f}'):>5s}/{g('cudagraph_actual_gib', '{:.2f}'):>5s}"
      f" kv{g('available_kv_gib', '{:.2f}'):>7s} blk{g('block_size'):>4s}x{g('num_gpu_blocks'):>7s}"
      f" tok{g('kv_cache_tokens'):>9s} conc{g('max_concurrency', '{:.2f}'):>7s}{tail}")
EOF
}

printf '%-3s %-58s %s\n' "#" "case" "outcome wall backend fa weights act non-torch cg(est/actual) availKV blocks tokens concurrency (GiB)" \
  | tee "$OUTDIR/table.txt"
ran=0
while IFS=$'\t' read -r idx id tmo casefile; do
  now=$(( $(date +%s) - START ))
  if [ "$now" -ge "$BUDGET" ]; then
    echo "budget ${BUDGET}s reached after $ran cases: not starting $id (#$idx) and later ones (BOOT_FROM=$idx resumes)" \
      | tee -a "$OUTDIR/table.txt"
    break
  fi
  left=$(( DEADLINE - now ))
  [ "$tmo" -gt "$left" ] && tmo=$left
  if [ "$left" -lt 30 ]; then
    echo "less than 30 s before the deadline: stopping before $id (#$idx)" | tee -a "$OUTDIR/table.txt"
    break
  fi
  out="$OUTDIR/$id.json"
  rm -f "$out"
  t0=$(date +%s)
  timeout -k 10 "$tmo" python3 "$HERE/boot_case.py" "$casefile" "$out" > "$OUTDIR/logs/$id.log" 2>&1
  rc=$?
  if [ ! -s "$out" ]; then  # killed or crashed before writing: keep what the log says
    python3 - "$casefile" "$out" "$rc" "$(( $(date +%s) - t0 ))" "$OUTDIR/logs/$id.log" <<'EOF'
import json, sys
case = json.load(open(sys.argv[1])); rc = int(sys.argv[3])
tail = open(sys.argv[5], errors="replace").read().splitlines()[-40:]
json.dump({"id": case["id"], "case": case, "outcome": "TIMEOUT" if rc in (124, 137) else "ERROR",
           "exit_code": rc, "wall_s": float(sys.argv[4]), "last_log_lines": tail,
           "exception": {"type": "Timeout" if rc in (124, 137) else f"exit {rc}", "message": tail[-1] if tail else ""}},
          open(sys.argv[2], "w"), indent=1)
EOF
  fi
  python3 -c "import json,sys; print(json.dumps(json.load(open(sys.argv[1]))))" "$out" >> "$OUTDIR/results.jsonl"
  printf '%-3s %-58s %s\n' "$idx" "$id" "$(row "$out")" | tee -a "$OUTDIR/table.txt"
  ran=$((ran + 1))
done < "$OUTDIR/cases/index.tsv"

echo "ran $ran cases in $(( $(date +%s) - START )) s" | tee -a "$OUTDIR/table.txt"
if [ -n "${BOOT_PACK_TO:-}" ]; then
  mkdir -p "$BOOT_PACK_TO"
  cp "$OUTDIR/results.jsonl" "$OUTDIR/table.txt" "$BOOT_PACK_TO/" 2>/dev/null
  tar cf - -C "$OUTDIR" logs | xz -T0 -6 > "$BOOT_PACK_TO/boot-logs.tar.xz"
  ls -l "$BOOT_PACK_TO"
fi
