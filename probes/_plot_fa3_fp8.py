"""Draw vLLM's FA-3 FP8 error against context beside the fp8-accumulation probe's curves.

    python probes/_plot_fa3_fp8.py records/evidence/<vllm-fa3-fp8-accuracy id>.yaml \
        records/evidence/<fp8-accumulation id>.yaml [records/evidence/<vllm-fa3-fp8-one-level id>.yaml] [out.png]

Reads the curves `kb probe run` stored under each record's `data.curves`: the fork's FP8 series (per head dim and
query heads per KV head), its bf16 baseline, and from the accumulation probe the wgmma switch kernel in place and
promoted every 128 keys and FlashInfer's FA3-backend FP8 path. All are relative L2 errors against fp64 attention
on the same inputs. With a vllm-fa3-fp8-one-level record, the same fork built without two-level accumulation is drawn
beside the default build (issue 45). The PNG goes to docs/figures/<first id>.png unless a path is given.
"""

from __future__ import annotations

import sys
from pathlib import Path

import yaml

ACC = {
    "switch:wgmma_inplace": ("wgmma FP8, accumulator in place (probe kernel)", "tab:red", "--"),
    "switch:wgmma_promote_4": ("wgmma FP8, promoted every 128 keys (probe kernel)", "tab:cyan", "--"),
    "flashinfer": ("FlashInfer 0.7.2.post1 FA3-backend FP8", "tab:purple", "--"),
}


def main(argv: list[str]) -> int:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    if len(argv) < 2:
        print(__doc__)
        return 2
    fork, acc = (yaml.safe_load(Path(p).read_text(encoding="utf-8")) for p in argv[:2])
    rest = list(argv[2:])
    one = yaml.safe_load(Path(rest.pop(0)).read_text(encoding="utf-8")) if rest and rest[0].endswith(".yaml") else None
    out = Path(rest[0]) if rest else Path(argv[0]).resolve().parents[2] / "docs" / "figures" / f"{fork['id']}.png"
    fig, ax = plt.subplots(figsize=(9, 7))
    for name, pts in sorted(fork["data"]["curves"].items()):
        xs = [p["ctx"] for p in pts]
        style = "-" if name.startswith("fp8") else ":"
        ax.plot(xs, [p["rel_err"] for p in pts], style, marker="o", ms=3,
                label=f"vLLM 0.24.0 FA-3 {name}")
    one_gpu = (one or {}).get("environment", {}).get("gpu")
    for (name, pts), color in zip(sorted((one or {}).get("data", {}).get("curves", {}).items()),
                                  ("black", "dimgrey"), strict=False):
        ax.plot([p["ctx"] for p in pts], [p["rel_err"] for p in pts], "-", color=color, lw=2.2, marker="^", ms=5,
                zorder=5, label=f"same FA-3 fork built with one-level accumulation {name} ({one_gpu})")
    for name, (label, color, style) in ACC.items():
        pts = acc["data"]["curves"].get(name) or []
        key = "acc_rel_err" if name.startswith("switch") else "rel_err"
        if pts:
            ax.plot([p["ctx"] for p in pts], [p[key] for p in pts], style, color=color, marker="s", ms=3, label=label)
    ax.axhline(2.0 ** -8, color="grey", lw=0.8, ls=":")
    ax.text(4096, 2.0 ** -8 * 1.1, "bf16 unit roundoff 2^-8", color="grey", fontsize=8)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("keys (context length)")
    ax.set_ylabel("relative L2 error vs fp64 on the same inputs")
    ax.set_title(f"FP8 attention error vs context, {fork['environment']['gpu']}"
                 + (f" (one-level build: {one_gpu})" if one_gpu and one_gpu != fork["environment"]["gpu"] else ""),
                 fontsize=10)
    ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.13), ncol=2)
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=120)
    print(out)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
