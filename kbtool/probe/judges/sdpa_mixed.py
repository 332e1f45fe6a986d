"""Probe: PyTorch SDPA with a KV dtype other than the query's, GQA, unequal q/v head dims, the default
dispatch order, and the math backend's peak memory against context length.

- mixed: a bf16 query with fp8 (e4m3, e5m2) or packed fp4 (e2m1 x2) K and V, and q = k = v in fp8, each backend
  forced alone (torch.nn.attention.sdpa_kernel);
- gqa: 8 query heads over 2 KV heads with enable_gqa=True, each backend;
- head_dim_v: q/k head dim 192 with v head dim 128, each backend;
- default: no backend forced; the profiled kernel names say which backend PyTorch picked;
- memory: the math backend at batch 1, 8 heads, q = kv = L; torch.cuda.max_memory_allocated over the inputs
  against the rule batch x heads x q x kv x 4 bytes (one fp32 score matrix).
"""

from __future__ import annotations

from typing import Any

from kbtool.probe.judging import claim_gates, env_vars, judge_gates, values
from kbtool.probe.spec import ProbeSpec

SPEC = ProbeSpec(
    id="sdpa-mixed",
    version=1,
    order=21,
    title="PyTorch SDPA: KV dtype other than q, GQA, dispatch order, math memory",
    claims=[
        "torch-sdpa-flash-dtypes",
        "torch-sdpa-efficient-dtypes",
        "torch-sdpa-cudnn-dtypes",
        "torch-sdpa-flash-head-dim",
        "torch-sdpa-efficient-head-dim",
        "torch-sdpa-cudnn-head-dim",
        "torch-sdpa-flash-sm-range",
        "torch-sdpa-efficient-sm-range",
        "torch-sdpa-cudnn-sm-range",
        "torch-sdpa-cudnn-requires-nvidia",
        "torch-sdpa-math-any-device",
        "torch-sdpa-math-any-shape",
        "torch-sdpa-cudnn-preferred-on-sm9x-sm10x",
        "torch-sdpa-flash-same-dtype-qkv",
        "torch-sdpa-efficient-same-dtype-qkv",
        "torch-sdpa-cudnn-same-dtype-qkv",
        "torch-sdpa-math-same-dtype-qkv",
    ],
    requires={"archs": None, "packages": ["torch"]},
    timeout_s=120,
)


BATCH, HEADS, SEQ, D = 2, 8, 256, 128


SUBJECT = {"flash": "torch-sdpa-flash", "efficient": "torch-sdpa-efficient", "cudnn": "torch-sdpa-cudnn",
           "math": "torch-sdpa-math"}


def _label(p: dict[str, Any]) -> str:
    extra = f" hq{p['num_heads']}/hkv{p['kv_heads']}" if "kv_heads" in p else ""
    hv = f"/{p['head_dim_v']}" if "head_dim_v" in p else ""
    return f"{p.get('backend')} q {p.get('dtype')} kv {p.get('kv_dtype')} hd{p.get('head_dim')}{hv}{extra}"


def variables(env: dict[str, Any]) -> Any:
    def bind(p: dict[str, Any]) -> dict[str, Any]:
        out = {"vendor": "nvidia", "sm": env.get("architecture"), "dtype": p.get("dtype"),
               "kv_dtype": p.get("kv_dtype"), "kv_dtype_differs": p.get("kv_dtype") != p.get("dtype"),
               "head_dim": p.get("head_dim"), "head_dim_v": p.get("head_dim_v", p.get("head_dim")),
               "num_heads": p.get("num_heads", HEADS), "kv_heads": p.get("kv_heads", HEADS)}
        out.update(env_vars(env))
        return out
    return bind


def _cudnn_version(env: dict[str, Any]) -> int | None:
    raw = (env.get("libraries") or {}).get("cudnn")
    try:
        return int(raw) if raw is not None else None
    except ValueError:
        return None


def _gate_cases(observations: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Cases that speak about a backend's gate: forced backend, not the memory sweep, kernels of that backend."""
    out = []
    for o in observations:
        p = o.get("params") or {}
        if p.get("kind") in ("memory", "default"):
            continue
        if (o.get("metrics") or {}).get("dispatch_ok") is False:
            continue
        out.append(o)
    return out


def _preferred_verdict(observations: list[dict[str, Any]], env: dict[str, Any]) -> dict[str, Any]:
    """torch-sdpa-cudnn-preferred-on-sm9x-sm10x: with cuDNN newer than 9.15 on 9.x/10.x the default pick is cudnn."""
    claim = "torch-sdpa-cudnn-preferred-on-sm9x-sm10x"
    scope = {"sm": env.get("architecture"), "torch": env.get("torch"), "cudnn": _cudnn_version(env)}
    picked = [(o.get("metrics") or {}).get("dispatched") for o in observations
              if (o.get("params") or {}).get("kind") == "default" and o.get("outcome") == "OK"]
    cudnn = _cudnn_version(env)
    if not picked or picked[0] is None or cudnn is None or cudnn <= 91500:
        return {"claim": claim, "verdict": "inconclusive", "scope": scope,
                "detail": f"default dispatch picked {picked[0] if picked else 'nothing'}; cuDNN {cudnn}"}
    verdict = "confirmed" if picked[0] == "cudnn" else "contradicted"
    return {"claim": claim, "verdict": verdict, "scope": scope,
            "detail": f"with no backend forced, bf16 hd{D} ran the {picked[0]} kernels (cuDNN {cudnn})"}


def judge(observations: list[dict[str, Any]], env: dict[str, Any]) -> list[dict[str, Any]]:
    claims = env.get("claims") or {}
    obs = _gate_cases(observations)
    ids = [c for c in SPEC.claims if c != "torch-sdpa-cudnn-preferred-on-sm9x-sm10x"]
    def flash_head_dim(p: dict[str, Any]) -> bool | None:
        """The statement's "q, k and v share the same last dimension", which the condition tree leaves out."""
        if p.get("backend") != "flash" or p.get("dtype") not in ("fp16", "bf16") or p.get("kv_dtype") != p.get("dtype"):
            return None
        d, dv = p.get("head_dim", 0), p.get("head_dim_v", p.get("head_dim", 0))
        return bool(d == dv and d <= 256)

    gates = claim_gates(claims, ids, lambda p: [SUBJECT.get(str(p.get("backend")), "")], variables(env),
                        overrides={"torch-sdpa-flash-head-dim": flash_head_dim})

    def scope_of(gate: Any) -> dict[str, Any]:
        subject = (claims.get(gate.claim) or {}).get("subject")
        picked = lambda p: SUBJECT.get(str(p.get("backend"))) == subject  # noqa: E731
        return {"sm": env.get("architecture"), "torch": env.get("torch"), "kinds": values(obs, "kind", picked),
                "dtypes": values(obs, "dtype", picked), "kv_dtypes": values(obs, "kv_dtype", picked)}

    return [*judge_gates(gates, obs, scope_of, _label), _preferred_verdict(observations, env)]


def summarize(observations: list[dict[str, Any]], env: dict[str, Any]) -> dict[str, Any]:
    table: dict[str, dict[str, str]] = {}
    memory = []
    for o in observations:
        p = o.get("params") or {}
        m = o.get("metrics") or {}
        if p.get("kind") == "memory":
            memory.append({"seq": p.get("seq"), "peak_bytes": m.get("peak_bytes"), "rule_bytes": m.get("rule_bytes"),
                           "peak_over_rule": m.get("peak_over_rule"), "outcome": o.get("outcome")})
            continue
        outcome = str(o.get("outcome"))
        if outcome == "OK" and m.get("correct") is False:
            outcome = "OK-but-wrong"
        table.setdefault(str(p.get("backend")), {})[_label(p)] = outcome
    return {"outcomes": table, "math_memory": memory}
