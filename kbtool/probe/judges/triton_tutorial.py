"""Probe: the Triton fused-attention tutorial kernel (python/tutorials/06-fused-attention.py) forward pass.

The tutorial ships in Triton's source tree, not in its wheel; a host that has the file puts it on the path as
`fused_attention_tutorial.py`. Cases: fp16 at head dims 16-256 and two it does not list (80, 512), bf16, fp8_e5m2
(V stored transposed, as the tutorial's benchmark does), and a bf16 query with fp8_e5m2 K/V; (1, 4, 1024, D),
non-causal. Autotuning is cut to the first configuration of each kernel (one compile per case): tuning changes
speed, not which inputs the kernel takes (every configuration has BLOCK_N >= 32, so the kernel's
static_assert(BLOCK_N <= HEAD_DIM) refuses head dim 16 under any of them).

v2: a compile error is read down to its root cause (Triton chains the error of the failing builtin, say tl.dot's
operand-dtype check, under CompilationErrors that echo kernel source); a root cause that names a dtype is the
kernel refusing that dtype (DTYPE). fp8_e5m2 runs at head dims 64 and 128, each trying up to three tuning
configurations in turn until one compiles (v1's only configuration crashed Triton's TTGIR pass manager at hd64). The
dtype claim is judged at head dims every configuration compiles (32-256), the hardware claim on fp16 cases there:
a head-dim refusal says nothing about dtypes or the GPU.

Getting the file: `probes/fetch-tutorial.sh` puts it in the ignored .tutorial/ (see CONTRIBUTING.md, "Add a
probe"); probes/host-run.sh puts .tutorial/ on the path, and the lead's run carries `.tutorial` in its carry list.
"""

from __future__ import annotations

from typing import Any

from kbtool.probe.judging import claim_expect, claim_gates, default_reason, env_vars, judge_gates, values
from kbtool.probe.spec import ProbeSpec

SPEC = ProbeSpec(
    id="triton-tutorial",
    version=2,
    order=35,
    title="Triton fused-attention tutorial: dtypes and head dims",
    claims=["triton-fused-attention-dtypes", "triton-fused-attention-head-dims", "triton-fused-attention-hardware"],
    requires={"archs": None, "packages": ["torch", "triton", "triton-tutorial"]},
    timeout_s=240,
    untestable=("The tutorial kernel is not a package: the triton wheel does not ship python/tutorials/"
                "06-fused-attention.py and the probe host cannot fetch it; probes/fetch-tutorial.sh puts it in "
                ".tutorial/ as fused_attention_tutorial.py, which must travel to the host to run this probe."),
    rejudges=(1,),
)


COMPILED_HEAD_DIMS = (32, 64, 128, 256)


def _label(p: dict[str, Any]) -> str:
    return f"q {p.get('dtype')} kv {p.get('kv_dtype')} hd{p.get('head_dim')}"


def reason_of(obs: dict[str, Any]) -> str | None:
    """The tutorial's own head-dim checks: `assert HEAD_DIM_K in {16, ...}` in forward, and
    `tl.static_assert(BLOCK_N <= HEAD_DIM)` in the kernel (every tuning config has BLOCK_N >= 32). Other compile
    errors echo kernel source, whose words name no gate: no reason is read from them."""
    text = str(obs.get("message") or "") + str((obs.get("metrics") or {}).get("traceback_tail") or "")
    if "assert HEAD_DIM_K in" in text or "static_assert(BLOCK_N <= HEAD_DIM)" in text:
        return "HEAD_DIM"
    if isinstance((obs.get("metrics") or {}).get("gate"), str):
        return default_reason(obs)  # a root cause the probe read (compile_refusal)
    return None


def judge(observations: list[dict[str, Any]], env: dict[str, Any]) -> list[dict[str, Any]]:
    claims = env.get("claims") or {}

    def bind(p: dict[str, Any]) -> dict[str, Any]:
        out = {"dtype": p.get("dtype"), "kv_dtype": p.get("kv_dtype"),
               "kv_dtype_differs": p.get("kv_dtype") != p.get("dtype"), "head_dim": p.get("head_dim"),
               "head_dim_v": p.get("head_dim"), "phase": "prefill"}
        out.update(env_vars(env))
        return out

    def compiled(p: dict[str, Any]) -> bool:
        return p.get("head_dim") in COMPILED_HEAD_DIMS

    def only(cid: str, where: Any) -> Any:
        data = claims.get(cid)
        if data is None:
            return None
        own = claim_expect(data, lambda p: ["triton-fused-attention"], bind)
        return lambda p: own(p) if where(p) else None

    def fp16(p: dict[str, Any]) -> bool:
        return compiled(p) and p.get("dtype") == p.get("kv_dtype") == "fp16"

    overrides = {cid: f for cid, f in (
        ("triton-fused-attention-dtypes", only("triton-fused-attention-dtypes", compiled)),
        ("triton-fused-attention-hardware", only("triton-fused-attention-hardware", fp16)),
    ) if f is not None}
    gates = claim_gates(claims, SPEC.claims, lambda p: ["triton-fused-attention"], bind, overrides=overrides)
    scope = {"sm": env.get("architecture"), "triton": (env.get("libraries") or {}).get("triton"),
             "phase": "prefill", "dtypes": values(observations, "dtype", lambda p: True),
             "head_dims": values(observations, "head_dim", lambda p: True)}
    return judge_gates(gates, observations, lambda g: scope, _label, reason_of=reason_of)
