"""Draw error and retrieval against context, per path, from an fp8-accumulation evidence record.

    python probes/_plot_fp8.py records/evidence/<id>.yaml [out.png]

Reads the curves that `kb probe run` stored under the record's `data.curves` (or rebuilds them from its cases).
The PNG goes to docs/figures/<id>.png of the repository that holds the records tree (images stay out of records/).
"""

from __future__ import annotations

import sys
from pathlib import Path

import yaml

STYLE = {
    "switch:wgmma_inplace": ("wgmma FP8, accumulator in place", "tab:red", "-"),
    "switch:wgmma_promote_1": ("wgmma FP8, promoted every 32 keys", "tab:green", "-"),
    "switch:wgmma_promote_4": ("wgmma FP8, promoted every 128 keys", "tab:olive", "--"),
    "switch:wgmma_promote_256": ("wgmma FP8, promoted every 8192 keys", "tab:orange", "--"),
    "flashinfer": ("FlashInfer FA3 FP8 prefill", "tab:purple", "-"),
    "fa3": ("FA-3 FP8", "tab:brown", "-"),
    "bf16": ("torch SDPA bf16", "tab:blue", "-"),
    "reference:fp64-on-fp8-inputs": ("fp64 on the fp8 inputs", "black", ":"),
}


def main(argv: list[str]) -> int:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    src = Path(argv[0])
    rec = yaml.safe_load(src.read_text())
    series = rec.get("data", {}).get("curves")
    if not series:
        sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
        from probes.fp8_accumulation import curves

        series = curves(rec.get("cases", []))
    fig, (ax_e, ax_r) = plt.subplots(1, 2, figsize=(12, 4.5))
    for key, (label, color, ls) in STYLE.items():
        pts = series.get(key)
        if not pts:
            continue
        xs = [p["ctx"] / 1024 for p in pts]
        if key != "reference:fp64-on-fp8-inputs":
            ax_e.plot(xs, [max(p["rel_err"], 1e-7) for p in pts], marker="o", color=color, ls=ls, label=label)
        ax_r.plot(xs, [p["retrieval"] for p in pts], marker="o", color=color, ls=ls, label=label)
    for ax in (ax_e, ax_r):
        ax.set_xscale("log", base=2)
        ax.set_xlabel("context (K keys)")
        ax.grid(True, which="both", alpha=0.3)
    ax_e.set_yscale("log")
    ax_e.set_ylabel("relative L2 error vs fp64 (bf16: vs fp64 on bf16 inputs)")
    ax_r.set_ylabel("needle retrieval (centred cosine, 64 queries)")
    ax_r.set_ylim(0, 1.05)
    ax_r.legend(fontsize=8, loc="lower left")
    env = rec.get("environment", {})
    fig.suptitle(f"FP8 attention accumulation on {env.get('gpu', '?')} (probe {rec.get('probe', {}).get('id')})")
    fig.tight_layout()
    out = Path(argv[1]) if len(argv) > 1 else src.resolve().parents[2] / "docs" / "figures" / f"{src.stem}.png"
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110)
    print(out)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
