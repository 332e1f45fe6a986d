"""Which attention backend vLLM would select, and why each other one is refused (design.md §4, issue 18).

vLLM (vllm/platforms/cuda.py) walks one priority list, chosen by compute capability and MLA, and takes the
first backend whose `validate_configuration` returns no reasons. Here each backend's checks are its
engine-backend claims (records/claims/vllm-*), evaluated for one release (`--vllm`), and the lists are
engine-priority records. An explicit `--attention-backend X` is taken as is when valid, else refused with
X's reasons, as vLLM does.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kbtool.solve.conditions import compare_versions, evaluate
from kbtool.solve.gates import Judge, apply_claims

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from kbtool.solve.answer import Reason
    from kbtool.solve.image import BackendV, Image

SM_OF_CC = {8.0: "sm80", 8.6: "sm86", 8.7: "sm87", 8.9: "sm89", 9.0: "sm90", 10.0: "sm100", 10.3: "sm103",
            11.0: "sm110", 12.0: "sm120", 12.1: "sm121"}
# vLLM's --kv-cache-dtype strings -> the KB's kv_dtype ("auto" is the model dtype)
KV_OF_VLLM = {"float16": "fp16", "bfloat16": "bf16", "fp8": "fp8_e4m3", "fp8_e4m3": "fp8_e4m3",
              "fp8_e5m2": "fp8_e5m2", "nvfp4": "nvfp4", "fp8_ds_mla": "fp8_ds_mla"}
DTYPE_OF_VLLM = {"bfloat16": "bf16", "float16": "fp16", "bf16": "bf16", "fp16": "fp16", "float32": "fp32"}


UNBOUND_OK = frozenset({"block_size", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim", "kv_lora_rank",
                        "num_heads", "causal"})
_SEV = {"ok": 0, "caveat": 1, "unknown": 2, "rejected": 3}


def _status_of(r: Reason) -> str:
    return "unknown" if r.depends_on else "rejected"


@dataclass
class BackendCheck:
    id: str
    name: str
    status: str  # ok | caveat | unknown | rejected
    reasons: list[Reason] = field(default_factory=list)

    @property
    def valid(self) -> bool:
        return self.status in ("ok", "caveat")


@dataclass
class Selection:
    """What vLLM would do: the backend it uses, the list it walked, and every refusal with its reasons."""

    version: str | None
    priority: list[str]
    checks: dict[str, BackendCheck]
    selected: str | None
    requested: str | None = None
    error: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return {
            "vllm": self.version, "selected": self.selected, "requested": self.requested, "error": self.error,
            "priority": self.priority,
            "backends": [{"id": c.id, "name": c.name, "status": c.status,
                          "reasons": [r.message for r in c.reasons]} for c in
                         (self.checks[b] for b in self.priority if b in self.checks)],
        }


def versions(img: Image, engine: str = "vllm") -> list[str]:
    """The releases the priority records name, oldest first."""
    out: set[str] = set()
    for _id, _e, _p, scope, _lists in img.priorities(engine):
        for _lib, introduced, fixed, last in scope:
            for v in (introduced, last):
                if v:
                    out.add(v)
            del fixed
    import functools

    return sorted(out, key=functools.cmp_to_key(compare_versions))


def default_version(img: Image) -> str | None:
    vs = versions(img)
    return vs[-1] if vs else None


def _in_range(version: str, scope: list[tuple[str, str | None, str | None, str | None]]) -> bool:
    for _lib, introduced, fixed, last in scope:
        if introduced and compare_versions(version, introduced) < 0:
            continue
        if fixed and compare_versions(version, fixed) >= 0:
            continue
        if last and compare_versions(version, last) > 0:
            continue
        return True
    return False


def priority(img: Image, env: dict[str, Any], version: str, platform: str = "cuda") -> list[str]:
    """The backend ids of the first list whose `when` holds, in the release's priority record."""
    for _id, _engine, plat, scope, lists in img.priorities("vllm"):
        if plat != platform or not _in_range(version, scope):
            continue
        for when, order in lists:
            if evaluate(when, env) is True:
                return list(order)
    return []


def check(img: Image, b: BackendV, env: dict[str, Any], version: str) -> BackendCheck:
    """One backend's own checks (its claims inside the release's scope) in one environment."""
    libs = {"vllm": version}
    out = apply_claims(img.claims(b.id), Judge(env, libs), "engine")
    lay = env.get("attention")
    # vLLM picks the block size itself when --block-size is not given, and skips the checks that read the
    # model's shape when it has no model config: such gates do not bind while their variables are unknown
    reasons = [r for r in out.reasons if not (r.depends_on and set(r.depends_on) <= UNBOUND_OK)]
    status = "ok" if not reasons else max((_status_of(r) for r in reasons), key=_SEV.__getitem__)
    if lay is not None and b.attention and lay not in b.attention:
        status = "rejected"
    return BackendCheck(b.id, b.backend_name, status, reasons)


def select(img: Image, env: dict[str, Any], version: str | None = None, requested: str | None = None,
           platform: str = "cuda") -> Selection:
    """vLLM's choice in `env` (a query environment: cc, dtype, kv_dtype, head_dim, attention, ...)."""
    version = version or default_version(img)
    if version is None:
        return Selection(None, [], {}, None, requested, "the KB has no vLLM priority records")
    env = dict(env, engine="vllm", vllm=version)
    backends = {b.id: b for b in img.backends("vllm")}
    by_name = {b.backend_name.upper(): b.id for b in backends.values()}
    order = priority(img, env, version, platform)
    checks = {bid: check(img, backends[bid], env, version) for bid in order if bid in backends}
    if requested:
        rid = by_name.get(requested.upper(), requested if requested in backends else None)
        if rid is None:
            return Selection(version, order, checks, None, requested,
                             f"unknown attention backend {requested!r}")
        c = checks.get(rid) or check(img, backends[rid], env, version)
        checks[rid] = c
        if c.valid:
            return Selection(version, order, checks, rid, requested)
        msgs = [r.message for r in c.reasons] or [f"{c.name} is {c.status} here"]
        return Selection(version, order, checks, None, requested,
                         f"Selected backend AttentionBackendEnum.{c.name} is not valid for this configuration. "
                         f"Reason: {msgs}")
    chosen = next((bid for bid in order if bid in checks and checks[bid].valid), None)
    error = None
    if chosen is None:
        if any(checks[b].status == "unknown" for b in checks):
            error = "depends on inputs not given"
        else:
            error = "No valid attention backend found for cuda"
    return Selection(version, order, checks, chosen, None, error)


def vllm_env(cc: float, *, dtype: str, kv: str, head_size: int, block: int | None, layout: str,
             sink: bool, trtllm: bool, num_heads: int | None = None) -> dict[str, Any]:
    """The query environment for one vLLM selector configuration (the probe's grid point)."""
    d = DTYPE_OF_VLLM.get(dtype, dtype)
    env: dict[str, Any] = {
        "cc": cc, "dtype": d, "kv_dtype": d if kv == "auto" else KV_OF_VLLM.get(kv, kv), "head_dim": head_size,
        "attention": {"dense": "gqa", "mla": "mla", "sparse": "sparse-mla"}[layout],
        "sparse": layout == "sparse", "sinks": sink, "trtllm_kernels": trtllm, "vendor": "nvidia",
        "kv_cache_dtype": kv,
    }
    if cc in SM_OF_CC:
        env["sm"] = SM_OF_CC[cc]
    if block is not None:
        env["block_size"] = block
    if num_heads is not None:
        env["num_heads"] = num_heads
    return env
