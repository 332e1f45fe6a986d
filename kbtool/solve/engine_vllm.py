"""vLLM behind the engine interface (kbtool/solve/engines.py): its release pinning, priority lists and selection
(kbtool/solve/engine.py, from its engine-priority and backend claim records), the pick's agreement with kb's kernel
layer (kbtool/solve/pick.py), its default block size and the kernel caveats it handles by default."""

from __future__ import annotations

from kbtool.solve import engine

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

HANDLED = {
    "fa3-fp8-long-context-two-level-accumulation":
        "handled: vLLM's flash-attention fork keeps two-level FP8 accumulation on by default",
}


class Vllm:
    name = "vllm"
    block_size = 16  # vLLM's default --block-size on CUDA for the non-MLA backends

    def pin_release(self, img: Any, q: Any) -> None:
        engine.pin_release(img, q)

    def priority(self, cx: Any, env: dict[str, Any]) -> list[str]:
        version = cx.q.vllm or cx.q.libs.get("vllm") or engine.default_version(cx.img)
        return engine.priority_order(cx.img, env, version, engine.platform_of(env)) if version else []

    def handled(self, claim: str) -> str | None:
        return HANDLED.get(claim)

    def release(self, q: Any) -> str | None:
        version: str | None = q.vllm or q.libs.get("vllm")
        return version

    def decide(self, cx: Any, acc: Any, envs: dict[str, dict[str, Any]], assumed: dict[str, Any], verdict: str,
               summary: str, memory: Any, backends: list[Any], kernels: list[Any]) -> tuple[Any, str, str, list[Any]]:
        from kbtool.solve.pick import with_pick

        block, verdict, summary = engine.apply_to_answer(cx, acc, envs, assumed, verdict, summary, memory)
        where = f"{acc.id}" + (f" x{cx.q.gpus}" if cx.q.gpus > 1 else "")
        verdict, summary, first = with_pick(block, backends, kernels, where, verdict, summary)
        return block, verdict, summary, first


ENGINE = Vllm()
