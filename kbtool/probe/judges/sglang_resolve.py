"""Probe: SGLang's own server-argument resolution over a grid, without a GPU (issue 27).

Each case is one platform (sm80, sm89, sm90, sm100, sm120, mi300x). `run` starts probes/_sglang_grid.py under
the interpreter that has SGLang (KB_SGLANG_PYTHON, else this one); it resolves architecture x model family x KV
dtype x page size x the attention-backend, prefill/decode-backend, KV-dtype, page-size and speculative flags
through SGLang's `ServerArgs` (0.5.23: `resolve_once()`, the hooks under sglang/srt/arg_groups/; 0.5.17:
`__post_init__`) with the platform facts set, and writes SGLang's outcome per point (backends, page size, KV
dtype, forced settings, or its exception type, exact message and place) to
tests/data/sglang/<release>/<platform>.json.gz (KB_SGLANG_RAW_DIR overrides the folder). The CI test
tests/solve/test_sglang_resolve.py replays every recorded point through kb's resolver
(kbtool/solve/engines/sglang/resolve.py), so CI needs no SGLang.

The judge holds every SGLang claim (records/claims/sglang-*, effect reject, with SGLang's message) against the
grid of the release that ran, in its scope or not (a claim judged outside its release range moves that range:
kbtool/probe/scoping.py). Per point it evaluates the claim on kb's resolution state where the claim is checked
(kb's pipeline for that release; where the pipeline has no such check, the state resolution ended in, resolved or
refused), and reads SGLang's outcome there: raised with the claim's exception type and message (its template's
fields as wildcards), raised something else, or resolved.
- the claim refuses and SGLang raised its message: agreement; SGLang raised another error: the point did not get
  that far and says nothing; SGLang resolved: contradiction (SGLang accepted what the claim refuses);
- the claim lets it through and SGLang raised its message: contradiction; otherwise agreement;
- SGLang raised the claim's message where the claim says nothing: contradiction, unless another claim with a
  matching message refuses there (that refusal is that claim's).
Confirmed needs at least one point where SGLang raised the claim's message as the claim predicts; a claim the grid
never refuses is inconclusive. One point against a claim contradicts it (design §5).
"""

from __future__ import annotations

import functools
import gzip
import json
import re
from collections import Counter
from pathlib import Path
from typing import Any

from kbtool.probe.judges import REPO
from kbtool.probe.spec import ProbeSpec

ROOT = REPO


PLATFORMS = ["sm80", "sm89", "sm90", "sm100", "sm120", "mi300x"]  # the keys of _sglang_grid.PLATFORMS


FIELDS = ("prefill", "decode", "page_size", "kv_cache_dtype", "dsa_prefill_backend", "dsa_decode_backend")


def _records() -> Path:
    from kbtool.paths import records_dir

    return records_dir()


def _claim_ids(records: Path | None = None) -> list[str]:
    """Every SGLang claim (records/claims/sglang-*.yaml), by file name: the spec lists them without parsing."""
    return sorted(p.stem for p in ((records or _records()) / "claims").glob("sglang-*.yaml"))


SPEC = ProbeSpec(
    id="sglang-resolve",
    version=1,
    order=6,
    title="SGLang server-argument resolution (no GPU)",
    claims=_claim_ids(),
    requires={"gpu": False, "packages": ["sglang"]},
    timeout_s=1200,
    workers=2,  # no GPU: two cases at once use both cores of a 2-core sweep host (issue 46)
    untestable="The sglang-resolve probe needs SGLang installed (pip install 'kbtool[sglang]' or KB_SGLANG_PYTHON).",
)


def _raw(path: str) -> Path:
    """A recorded grid named in evidence (tests/data/sglang/...): in the checkout, or in the installed copy."""
    p = Path(path)
    if p.is_absolute() or (ROOT / p).exists():
        return p if p.is_absolute() else ROOT / p
    import kbtool

    return Path(kbtool.__file__).parent / "_data" / "sglang" / p.relative_to("tests/data/sglang")


def load(path: Path) -> dict[str, Any]:
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        return json.load(fh)  # type: ignore[no-any-return]


def platform(p: dict[str, Any]) -> dict[str, Any]:
    """A grid platform as kb's platform facts (kbtool/solve/engines/sglang/facts.py platform_facts)."""
    cap = p["capability"]
    cuda = p["kind"] == "cuda"
    return {"vendor": "nvidia" if cuda else "amd", "cc": cap[0] + cap[1] / 10,
            "cuda": p.get("torch_version_cuda") if cuda else None, "gpu_mem_mib": float(p["memory_mib"]),
            "flashinfer_available": bool((p.get("facts") or {}).get("has_flashinfer", cuda))}


def points(doc: dict[str, Any]) -> list[tuple[str, str, list[str], dict[str, Any], dict[str, Any], dict[str, Any],
                                              dict[str, Any]]]:
    """(platform, model, argv, platform facts, model facts, ServerArgs fields, SGLang's outcome) per grid row; each
    argv read with the flag table of the release the grid ran (its `sglang`)."""
    from kbtool.errors import UsageError
    from kbtool.solve.engines.sglang.args import parse_argv
    from kbtool.solve.engines.sglang.facts import model_facts

    plats = {k: platform(v) for k, v in doc["platforms"].items()}
    facts = {k: model_facts(v) for k, v in doc["models"].items()}
    parsed: dict[int, dict[str, Any]] = {}
    out = []
    for p, m, _tag, a, o in doc["rows"]:
        argv = doc["argvs"][a]
        if a not in parsed:
            try:
                parsed[a] = parse_argv(argv, doc.get("sglang")).server_args()
            except UsageError as exc:  # kb's parser refuses the flag (an argparse choice): no resolution
                parsed[a] = {REFUSED: str(exc)}
        out.append((p, m, argv, plats[p], facts[m], parsed[a], doc["outcomes"][o]))
    return out


REFUSED = "_refused"


def outcome(img: Any, release: str, plat: dict[str, Any], facts: dict[str, Any], args: dict[str, Any],
            trace: dict[str, Any] | None = None) -> dict[str, Any]:
    """kb's resolution of one point, or its parser's refusal as SGLang's argparse refusal (SystemExit)."""
    from kbtool.solve.engines.sglang import resolve as sr

    if REFUSED in args:
        return {"error": "SystemExit", "message": args[REFUSED], "where": "argparse"}
    return sr.resolve(img, release, plat, facts, args, trace=trace)


_KB_CHOICE = re.compile(r"(--[\w-]+): invalid choice '([^']*)'")


_SGLANG_CHOICE = re.compile(r"argument (--[\w-]+)[^:]*: invalid choice: '([^']*)'")


def _choice(message: str | None, pattern: re.Pattern[str]) -> tuple[str, str] | None:
    m = pattern.search(message or "")
    return (m.group(1), m.group(2)) if m else None


def differs(got: dict[str, Any], want: dict[str, Any], fields: tuple[str, ...] = FIELDS) -> list[str]:
    """The fields where kb's resolution differs from SGLang's (the error: type and exact message; an argparse
    refusal of a choice: the same flag and value, kb's parser words it its own way)."""
    if "error" in want or "error" in got:
        if want.get("where") == "argparse" == got.get("where") and want.get("error") == got.get("error"):
            kb, sgl = _choice(got.get("message"), _KB_CHOICE), _choice(want.get("message"), _SGLANG_CHOICE)
            return [] if kb is not None and kb == sgl else ["error"]
        if (got.get("error"), got.get("message")) != (want.get("error"), want.get("message")):
            return ["error"]
        return []
    return [f for f in fields if got.get(f) != want.get(f)]


@functools.cache
def _image(records: Path | None = None) -> Any:
    from kbtool.kb import load_kb
    from kbtool.solve.imagebuild import image_of

    return image_of(load_kb(records or _records())[0])


@functools.cache
def message_pattern(message: str) -> re.Pattern[str]:
    """A claim's message as a pattern: its template fields ({attention_backend}) match any text."""
    parts = re.split(r"\{[a-z_][a-z0-9_-]*\}", message)
    return re.compile(".+?".join(re.escape(p) for p in parts), re.S)


def _label(p: dict[str, Any]) -> str:
    return f"{p['platform']} {p['model']} {' '.join(p['argv'])}".strip()


def judge_grid(img: Any, release: str, grid_points: list[tuple[Any, ...]],
               claim_ids: list[str] | None = None) -> list[dict[str, Any]]:
    """Per SGLang claim: agreement and the points against it over one release's grid (see the module docstring)."""
    from kbtool.solve.conditions import evaluate

    claims = img.engine_data("sglang")["claims"]
    ids = sorted(claims) if claim_ids is None else [c for c in claim_ids if c in claims]
    pats = {c: message_pattern(claims[c][2]) for c in ids}
    raises = {c: claims[c][3].get(release, (None, None))[0] for c in ids}
    tally: dict[str, dict[str, Any]] = {
        c: {"agree": 0, "refused_ok": 0, "other": 0, "ran": [], "refused": [], "platforms": set()} for c in ids}
    for plat, model, argv, pf, mf, args, want in grid_points:
        trace: dict[str, Any] = {}
        outcome(img, release, pf, mf, args, trace=trace)
        point = {"platform": plat, "model": model, "argv": argv}
        err = want.get("message") if "error" in want else None
        matched = {c for c in ids if err is not None and pats[c].fullmatch(err)
                   and raises[c] in (None, want["error"])}
        predicted: dict[str, bool | None] = {}
        for c in ids:
            when, requires = claims[c][0], claims[c][1]
            state = trace.get("checks", {}).get(c) or trace.get("env") or {}
            w = evaluate(when, state) if when is not None else True
            predicted[c] = None if w is not True else evaluate(requires, state) if requires is not None else True
        for c in ids:
            t, want_runs = tally[c], predicted[c]
            if want_runs is None:
                if c in matched and not any(predicted[o] is False for o in matched if o != c):
                    t["refused"].append(point)  # SGLang raised its message where the claim says nothing
                    t["platforms"].add(plat)
                continue
            t["platforms"].add(plat)
            if want_runs is False:
                if c in matched:
                    t["agree"] += 1
                    t["refused_ok"] += 1
                elif err is not None:
                    t["other"] += 1  # refused before, or for another reason: the point says nothing here
                else:
                    t["ran"].append(point)
            elif c in matched and not any(predicted[o] is False for o in matched if o != c):
                t["refused"].append(point)
            else:
                t["agree"] += 1
    return [{"claim": c, **{k: v for k, v in tally[c].items() if k != "platforms"},
             "platforms": [p for p in PLATFORMS if p in tally[c]["platforms"]]} for c in ids]


def _observed(observations: list[dict[str, Any]]) -> tuple[str | None, list[tuple[Any, ...]], list[str]]:
    release, pts, plats = None, [], []
    for obs in observations:
        m = obs.get("metrics") or {}
        if obs.get("outcome") != "OK" or not m.get("raw"):
            continue
        doc = load(_raw(m["raw"]))
        release = release or str(doc["sglang"])
        pts += points(doc)
        plats += list(doc["platforms"])
    return release, pts, plats


def judge(observations: list[dict[str, Any]], env: dict[str, Any]) -> list[dict[str, Any]]:
    release, pts, plats = _observed(observations)
    if release is None:
        return []
    out = []
    for r in judge_grid(_image(), release, pts, SPEC.claims):
        bad = len(r["ran"]) + len(r["refused"])
        if bad:
            verdict = "contradicted"
        elif r["refused_ok"]:
            verdict = "confirmed"
        else:
            verdict = "inconclusive"
        parts = [f"{r['agree']} of {r['agree'] + bad} grid points as the claim says (SGLang {release}), "
                 f"{r['refused_ok']} of them refused with its message"]
        if r["ran"]:
            parts.append(f"SGLang resolved what the claim refuses at {len(r['ran'])} points, e.g. "
                         + "; ".join(_label(p) for p in r["ran"][:2]))
        if r["refused"]:
            parts.append(f"SGLang raised the claim's message where the claim lets it through at {len(r['refused'])} "
                         "points, e.g. " + "; ".join(_label(p) for p in r["refused"][:2]))
        if not bad and not r["refused_ok"]:
            parts.append("the grid never reaches its refusal")
        out.append({"claim": r["claim"], "verdict": verdict,
                    "scope": {"sglang": release, "platform": r["platforms"] or plats, "gpu": "none (engine probe)"},
                    "detail": "; ".join(parts)})
    return out


def summarize(observations: list[dict[str, Any]], env: dict[str, Any]) -> dict[str, Any]:
    """kb's resolution against SGLang's at every recorded point of this run: agreement per platform."""
    release, pts, _plats = _observed(observations)
    if release is None:
        return {}
    img = _image()
    per: dict[str, Counter[str]] = {}
    for plat, _m, _argv, pf, mf, args, want in pts:
        got = outcome(img, release, pf, mf, args)
        c = per.setdefault(plat, Counter())
        c["points"] += 1
        c["agree"] += not differs(got, want)
        c["errors"] += "error" in want
    return {"sglang": release, "grid_points": len(pts), "agree": sum(c["agree"] for c in per.values()),
            "per_platform": {p: dict(c) for p, c in per.items()},
            "raw": sorted({str((o.get("metrics") or {}).get("raw")) for o in observations if o.get("metrics")})}
