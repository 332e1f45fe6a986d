#!/usr/bin/env bash
# One device call for issue 45: vllm-fa3-mla, vllm-fa2, vllm-fa4 and the one-level FA-3 build + probe, concurrently.
set -u
T0=$SECONDS
export PATH=/tmp/site/bin:$PATH
mkdir -p /tmp/fa3src /tmp/logs && tar xJf .fa3src/fa3src.tar.xz -C /tmp/fa3src
probes/host-run.sh /tmp/o-mla --probe vllm-fa3-mla --budget-s 200 > /tmp/logs/mla.log 2>&1 &
while [ ! -f /tmp/site/.kb-installed ] && [ $((SECONDS - T0)) -lt 200 ]; do sleep 2; done
echo "installed at $((SECONDS - T0)) s"; ls /tmp/site/vllm /tmp/site/vllm/vllm_flash_attn | head -20
nvcc --version | tail -2; which ninja
( export PYTHONPATH=/tmp/site; MAX_JOBS=16 timeout 420 python3 probes/_fa3_one_level_build.py /tmp/fa3src /tmp/one \
    /tmp/site/vllm/vllm_flash_attn 0.24.0 > /tmp/logs/build.log 2>&1; echo "build rc $? at $((SECONDS - T0)) s" >> /tmp/logs/build.log ) &
BUILD=$!
probes/host-run.sh /tmp/o-fa2 --probe vllm-fa2 --budget-s 330 > /tmp/logs/fa2.log 2>&1 &
probes/host-run.sh /tmp/o-fa4 --probe vllm-fa4 --budget-s 330 > /tmp/logs/fa4.log 2>&1 &
wait $BUILD
tail -5 /tmp/logs/build.log
if [ -f /tmp/one/vllm/vllm_flash_attn/_vllm_fa3_C.abi3.so ]; then
  left=$((560 - (SECONDS - T0)))
  PYTHONPATH="/tmp/one:/tmp/site:/tmp/site/nvidia_cutlass_dsl/dsl_packages:$PWD" timeout $left \
    python3 -m kbtool probe run --out /tmp/o-one --probe vllm-fa3-fp8-one-level --budget-s $((left - 40)) > /tmp/logs/one.log 2>&1
  echo "one-level rc $? at $((SECONDS - T0)) s"
fi
while [ -n "$(jobs -rp)" ] && [ $((SECONDS - T0)) -lt 570 ]; do sleep 3; done; jobs -l
for p in mla fa2 fa4 one; do echo "== $p"; tail -25 /tmp/logs/$p.log 2>/dev/null; done
mkdir -p $OUT/ev
cp /tmp/o-*/*.yaml $OUT/ev/ 2>/dev/null
tail -c 200000 /tmp/logs/build.log > $OUT/build.log
cat /tmp/logs/{mla,fa2,fa4,one}.log > $OUT/probes.log 2>/dev/null
ls -la $OUT $OUT/ev; echo "total $((SECONDS - T0)) s"
