"""Probe: vLLM's own attention-backend checks and priority lists over a grid, without a GPU (issue 18).

Each case is one compute capability. `run` starts probes/_vllm_grid.py under the interpreter that has vLLM
(KB_VLLM_PYTHON, else this one); it calls every registered backend's `validate_configuration` and the
CUDA platform's priority lists and `get_valid_backends` for head size x dtype x KV dtype x block size x
layout (dense, MLA, sparse MLA) x sinks x TRT-LLM kernels available, and writes vLLM's reason strings per
grid point to tests/data/vllm/<version>/cc<cc>.json.gz (KB_VLLM_RAW_DIR overrides the folder). The CI test
tests/solve/test_engine_vllm.py compares kb's engine layer with those files, so CI needs no vLLM.

The judge holds each engine claim (records/claims, subject a vllm-* engine backend, effect reject, version
scope containing the vLLM that ran) against the grid: where the claim says the backend is refused, vLLM
must give a reason of the claim's kind for that backend; where it says the backend may run, vLLM must not.
A refusal of that kind where another claim of the same backend predicts a refusal is that claim's (vLLM's
combination strings name several things at once: "NVFP4 KV cache at head_size 64"); a point the claim refuses
that vLLM refused for other reasons only did not run, and says nothing about the claim.
"""

from __future__ import annotations

import functools
import gzip
import json
import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kbtool.probe.judges import REPO
from kbtool.probe.recorded import GridSuperseded, resolved, verified
from kbtool.probe.spec import ProbeSpec

ROOT = REPO


def _records() -> Path:
    """The records tree in use: the checkout's, $KB_RECORDS, or the installed copy (kbtool.paths)."""
    from kbtool.paths import records_dir

    return records_dir()


def _raw(path: str) -> Path:
    """A recorded grid named in evidence (tests/data/vllm/...): in the checkout, or in the installed copy."""
    p = Path(path)
    if p.is_absolute() or (ROOT / p).exists():
        return p if p.is_absolute() else ROOT / p
    import kbtool

    return Path(kbtool.__file__).parent / "_data" / "vllm" / p.relative_to("tests/data/vllm")


# The reason strings vLLM gives, by the claim reason code they answer to
REASON_KIND = {
    "HEAD_DIM": ("head_size",),
    "DTYPE": ("dtype not supported", "requires bfloat16"),
    "KV_DTYPE": ("kv_cache_dtype", "kv-cache", "KV cache", "NVFP4"),
    "BLOCK_SIZE": ("block_size",),
    "ARCH": ("compute capability", "only supported on", "requires SM", "requires sm_"),
    "SINKS": ("sink",),
    "SLIDING_WINDOW": ("sliding window",),  # "sliding window not supported" (0.26.0 on; backend.py, issue 46)
}


def _load_yaml(path: Path) -> Any:
    """The record's data, or None where it is not YAML (`kb validate` reports that file as KB100; the judge reads
    the rest rather than stopping the whole tree's validation with an internal error)."""
    import yaml

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml where built: the claims are read on every judge
    try:
        return yaml.load(path.read_text(encoding="utf-8"), Loader=loader)
    except (yaml.YAMLError, UnicodeDecodeError):
        return None


JUDGED_EFFECTS = ("reject", "supports")


@functools.cache
def backends_of(records: Path | None = None) -> dict[str, tuple[tuple[str, str], ...]]:
    """Claim subject -> the vllm-* engine-backend records (id, vLLM name) it may be judged as: each backend record
    itself, and each kernel the backend records list under `kernels` (cutlass-mla-decode -> vllm-cutlass-mla)."""
    records = records or _records()
    own: dict[str, tuple[tuple[str, str], ...]] = {}
    users: dict[str, list[tuple[str, str]]] = {}
    for path in sorted((records / "engine-backends").glob("vllm-*.yaml")):
        rec = _load_yaml(path)
        if not isinstance(rec, dict):
            continue
        me = (path.stem, str(rec.get("backend_name")))
        own[path.stem] = (me,)
        for kernel in rec.get("kernels") or []:
            users.setdefault(str(kernel), []).append(me)
    return {**{k: tuple(v) for k, v in users.items()}, **own}


def backend_record(claim: dict[str, Any]) -> str | None:
    """The engine-backend record a claim is judged as: its subject's only backend, or, for a kernel several backends
    run, the one backend the statement names (TRITON_ATTN, not TRITON_ATTN_DIFFKV); None when that is unclear."""
    found = backends_of().get(str(claim.get("subject")), ())
    if len(found) > 1:
        text = str(claim.get("statement") or "")
        found = tuple(b for b in found if re.search(rf"(?<![A-Z0-9_]){re.escape(b[1])}(?![A-Z0-9_])", text))
    return found[0][0] if len(found) == 1 else None


@functools.cache
def engine_claims(records: Path | None = None) -> list[dict[str, Any]]:
    """Claims about vLLM engine backends (or a kernel only one backend runs) that reject, or that say the backend
    supports something vLLM gates by one of REASON_KIND's codes, as records (dicts); read once per process (the
    spec and the judge both ask). Callers must not mutate the list."""
    records = records or _records()
    subjects = backends_of(records)
    out = []
    for path in sorted((records / "claims").glob("*.yaml")):
        text = path.read_text(encoding="utf-8")
        head = re.search(r"^subject:\s*(\S+)", text, re.MULTILINE)
        if head is None or head.group(1) not in subjects:
            continue  # most claims are about other subjects: not parsed
        rec = _load_yaml(path)
        if not isinstance(rec, dict) or rec.get("effect") not in JUDGED_EFFECTS or backend_record(rec) is None:
            continue
        if rec["effect"] == "supports" and (rec.get("reason") or {}).get("code") not in REASON_KIND:
            continue  # a support vLLM's gates cannot refuse (a kernel's shapes) is not the selector's to judge
        about_vllm = any(s.get("library") == "vllm" for s in rec.get("scope") or [])
        if not about_vllm and (rec["effect"] != "reject" or rec["subject"] not in subjects[rec["subject"]][0]):
            continue  # a kernel's own claims (FlashInfer's, FlashMLA's) are about that library, not about vLLM
        out.append(rec)
    return out


SPEC = ProbeSpec(
    id="vllm-selector",
    # 2: a point refused for other reasons only says nothing about a claim; sink reasons are SINKS. 3: claims about
    # a kernel one backend runs, `supports` claims of a gated kind; any point against a claim contradicts it (design
    # §5: no `partial`); the grid imports FLASHINFER_MLA of 0.19.1 (its workspace goes to the meta device).
    # 4: the grid asks use_mm_prefix True as well at dense points (a `mm_prefix` column, issue 44); the claims
    # are held at the mm_prefix False points only, as before. 5: the grid asks has_sliding_window as well (a
    # `sliding_window` column, where the release's AttentionSelectorConfig has the field, issue 46); the claims are
    # held at the sliding points too, which carry sliding_window > 0 (a refusal "sliding window not supported" is
    # SLIDING_WINDOW); version 4's grids have no such point and judge as before
    version=5,
    rejudges=(1, 2, 3, 4),
    order=5,
    title="vLLM attention-backend selector (no GPU)",
    claims=[c["id"] for c in engine_claims()],
    requires={"gpu": False, "packages": ["vllm"]},
    timeout_s=900,
    untestable="The vLLM selector probe needs vLLM installed (pip install 'kbtool[engine]' or KB_VLLM_PYTHON).",
)


def load(path: Path) -> dict[str, Any]:
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        return json.load(fh)  # type: ignore[no-any-return]


def rows(doc: dict[str, Any], mm_prefix: bool | None = False) -> list[dict[str, Any]]:
    """The grid points as dicts: params, the selected backend, and vLLM's reasons per backend. `mm_prefix`: the
    points of that use_mm_prefix only (False, the default: the points every claim is about; no claim reads the
    multimodal prefix mask), or None for all. A grid recorded before the axis (probe version < 4, no `mm_prefix`
    column) has mm_prefix None at every point: not asked, so vLLM's default (False) is what ran. `sliding`: the
    13th column, has_sliding_window (probe version 5, where the release's selector has the field), else None: not
    asked (the release's selector does not read it, or the grid predates the axis); every point is returned."""
    names, reasons, sets = doc["backends"], doc["reasons"], doc["reason_sets"]
    heads = (doc.get("grid") or {}).get("num_heads") or {}
    texts = [tuple(reasons[i] for i in s) for s in sets]  # one shared tuple per reason set
    out = []
    for r in doc["rows"]:
        cc, trt, layout, head, dt, kv, block, sink, chosen, prio, per = r[:11]
        mm = r[11] if len(r) > 11 else None
        if mm_prefix is not None and bool(mm) != mm_prefix:
            continue
        out.append({"cc": cc, "trtllm": trt, "layout": layout, "head_size": head, "dtype": dt, "kv": kv,
                    "block": block, "sink": sink, "num_heads": heads.get(layout), "selected": chosen,
                    "priority": doc["priorities"][prio], "mm_prefix": mm,
                    "sliding": r[12] if len(r) > 12 else None,
                    "reasons": {n: texts[s] for n, s in zip(names, per, strict=True) if s >= 0}})
    return out


# vLLM's refusals that are no claim kind's and need none: the layout a backend serves, and the device the grid
# cannot be (no driver, an AMD-only backend). A reason that is neither one of these nor of a REASON_KIND nor a
# release's WORDINGS (vLLM reworded a refusal the judge has not been taught) is unattributed: the probe cannot say
# which claim it answers.
OTHER_REASONS = ("MLA not supported", "sparse not supported", "requires sparse MLA", "Found no NVIDIA driver",
                 "not supported on this device", "not supported on the current device", "requires AMD")
OTHER = "OTHER"
"""The kind of a refusal of OTHER_REASONS' sort: a layout or device refusal no claim needs."""


@dataclass(frozen=True)
class Wording:
    """A refusal vLLM words its own way in a range of releases, read in the code of the release that introduced it:
    within the range a reason containing `text` is of `kind` (a REASON_KIND code, or OTHER) and of no other kind;
    outside it the words mean nothing to the judge, so older releases' evidence classifies as it always did."""

    text: str
    kind: str
    introduced: str
    source: str  # vllm-project/vllm path:line at the tag's commit, where the words are
    last: str | None = None  # the last release known to word it so; None: every later release until read otherwise

    def covers(self, version: str) -> bool:
        from kbtool.solve.conditions import compare_versions

        return compare_versions(version, self.introduced) >= 0 and (
            self.last is None or compare_versions(version, self.last) <= 0)


# vLLM 0.34.0 (tag v0.34.0, commit 62d4bc3c7) reworded FLASH_ATTN's combination checks (issue 46); FLASH_ATTN_DIFFKV
# and the TRITON_FLASH_ATTN composite give the same words, the composite prefixed "FLASH_ATTN: ".
WORDINGS = (
    # the fp8 KV gate (0.33.0: "FP8 KV cache requires FA3 on SM90, ...", a KV_DTYPE reason by its "KV cache")
    Wording("FP8 KV requires FA3 (SM90), equal-d512 FA4 (SM90), or FA4 (SM100)", "KV_DTYPE", "0.34.0",
            "vllm/v1/attention/backends/flash_attn.py:505"),
    # a quantized KV at head 512 on cc 9.0 (FA4's SM90 path): claim vllm-flash-attn-sm90-d512-fp8-kv-block-64
    Wording("SM90 d512 FP8 KV requires a block size divisible by 64", "BLOCK_SIZE", "0.34.0",
            "vllm/v1/attention/backends/flash_attn.py:481"),
    # the same branch with use_sparse: a layout FLASH_ATTN does not serve (no sparse MLA)
    Wording("SM90 d512 FP8 KV does not support block sparsity", OTHER, "0.34.0",
            "vllm/v1/attention/backends/flash_attn.py:483"),
    # FLASHINFER_TS refuses MLA, sparse MLA and the multimodal prefix mask in one sentence: layouts it does not serve
    Wording("FLASHINFER_TS supports dense non-MLA attention only", OTHER, "0.34.0",
            "vllm/v1/attention/backends/flashinfer_ts.py:509"),
)


@functools.cache
def reason_kinds(reason: str, version: str) -> frozenset[str]:
    """The kinds a refusal states at a vLLM release: the kind of the release's WORDINGS it contains (that one only),
    else the REASON_KIND codes whose words it has (a reason about sinks is about sinks only: "sink not supported on
    compute capability < 9.0"), plus OTHER for a layout or device refusal. Empty: unattributed."""
    for w in WORDINGS:
        if w.text in reason and w.covers(version):
            return frozenset((w.kind,))
    kinds = {code for code, keys in REASON_KIND.items()
             if any(k in reason for k in keys) and (code == "SINKS" or "sink" not in reason)}
    if any(k in reason for k in OTHER_REASONS):
        kinds.add(OTHER)
    return frozenset(kinds)


def unattributed(reason: str, version: str) -> bool:
    """Whether a refusal at a vLLM release is of no claim kind the judge knows and not a layout or device refusal."""
    return not reason_kinds(reason, version)


def of_kind(code: str, reasons: list[str], version: str) -> list[str]:
    """vLLM's reasons of one claim kind at a release."""
    return [r for r in reasons if code in reason_kinds(r, version)]


@functools.cache
def architectures(records: Path | None = None) -> dict[str, str | None]:
    """{architecture id: compute capability} of the architecture records: the grid's `sm` comes from them."""
    out: dict[str, str | None] = {}
    for path in sorted(((records or _records()) / "architectures").glob("*.yaml")):
        rec = _load_yaml(path)
        if isinstance(rec, dict) and isinstance(rec.get("id"), str):
            cc = rec.get("compute_capability")
            out[rec["id"]] = str(cc) if cc is not None else None
    return out


def grid_env(p: dict[str, Any], archs: dict[str, str | None] | None = None) -> dict[str, Any]:
    from kbtool.solve.engines.vllm.selection import vllm_env

    return vllm_env(float(p["cc"]), dtype=p["dtype"], kv=p["kv"], head_size=p["head_size"], block=p["block"],
                    layout=p["layout"], sink=p["sink"], trtllm=p["trtllm"], archs=archs or architectures(),
                    num_heads=p.get("num_heads"), sliding=p.get("sliding"))


def _mask(indices: list[int], n: int) -> int:
    """The set of point indices as the bits of an int (the judge's sets: union, intersection, count in C)."""
    b = bytearray(n // 8 + 1)
    for i in indices:
        b[i >> 3] |= 1 << (i & 7)
    return int.from_bytes(b, "little")


def _bits(m: int) -> list[int]:
    """The indices of the set bits of `m`, lowest first."""
    out = []
    while m:
        low = m & -m
        out.append(low.bit_length() - 1)
        m ^= low
    return out


def judge_grid(claims: list[dict[str, Any]], points: list[dict[str, Any]], version: str,
               any_scope: bool = False) -> list[dict[str, Any]]:
    """Per claim: (agree, disagree examples, ccs) over the grid points of one vLLM release; the claims whose
    vLLM scope holds the release, or with `any_scope` every claim with a vLLM scope or none."""
    from kbtool.solve.conditions import condition_vars, evaluate

    records = {p.stem: r for p in (_records() / "engine-backends").glob("*.yaml")
               if isinstance(r := _load_yaml(p), dict)}
    name_of = {k: r.get("backend_name") for k, r in records.items()}
    layouts = {k: list(r.get("attention") or ["mha", "gqa"]) for k, r in records.items()}
    compiled = [(c, _condition(c.get("when")), _condition(c.get("requires"))) for c in claims
                if any_scope or _scope_has(c, version)]
    rec_id = {c["id"]: backend_record(c) or c["subject"] for c, _, _ in compiled}
    envs = [dict(grid_env(p), engine="vllm", vllm=version) for p in points]
    n = len(points)
    # Claims x points is tens of thousands of points times a hundred claims: the sets of points are ints (a bit
    # per point), and what can be shared is worked out once. A prediction reads only its condition's variables:
    # the points of each value of them (a key) are one set, each key evaluated at one point. A judgement reads only
    # (prediction, the backend's reasons at the point, the point's cc, explained by another claim): the points of
    # each (reasons, cc) of a backend are one set.
    asked: dict[str, list[int]] = {}  # backend -> the points where it was asked
    for i, p in enumerate(points):
        for b in p["reasons"]:
            asked.setdefault(b, []).append(i)
    eligible: dict[tuple[Any, ...], int] = {}  # (backend, layouts) -> points where the claim can be held
    classes: dict[tuple[Any, ...], dict[tuple[Any, ...], int]] = {}  # (backend, layouts) -> (reasons, cc) -> points
    by_value: dict[str, dict[Any, int]] = {}  # variable -> value -> points
    by_key: dict[tuple[str, ...], dict[tuple[Any, ...], int]] = {(): {(): (1 << n) - 1}}  # names -> key -> points

    def keyed(names: tuple[str, ...]) -> dict[tuple[Any, ...], int]:
        """The points of each value of the variables `names` (refined one variable at a time; prefixes shared)."""
        if names not in by_key:
            var = names[-1]
            if var not in by_value:
                at: dict[Any, list[int]] = {}
                for i, env in enumerate(envs):
                    at.setdefault(env.get(var), []).append(i)
                by_value[var] = {v: _mask(ix, n) for v, ix in at.items()}
            by_key[names] = {(*k, v): x for k, m in keyed(names[:-1]).items()
                             for v, vm in by_value[var].items() if (x := m & vm)}
        return by_key[names]

    group: dict[str, tuple[Any, ...]] = {}  # claim -> (backend, layouts)
    runs: dict[str, tuple[int, int]] = {}  # claim -> (points it lets run, points it refuses)
    for c, when, req in compiled:
        backend, served = name_of.get(rec_id[c["id"]]), tuple(layouts.get(rec_id[c["id"]], []))
        g = group[c["id"]] = (backend, served)
        if g not in eligible:  # the backend was asked, for a layout it serves
            idx = [i for i in asked.get(backend or "", []) if not served or envs[i]["attention"] in served]
            eligible[g] = _mask(idx, n)
            members: dict[tuple[Any, ...], list[int]] = {}
            for i in idx:
                members.setdefault((points[i]["reasons"][backend], points[i]["cc"]), []).append(i)
            classes[g] = {k: _mask(v, n) for k, v in members.items()}
        lets, refuses = 0, 0
        for m in keyed(tuple(sorted(condition_vars(when) | condition_vars(req)))).values():
            m &= eligible[g]
            if not m:
                continue
            env = envs[(m & -m).bit_length() - 1]  # any point of the key: the conditions read only its variables
            w = evaluate(when, env) if when is not None else True
            v = None if w is not True else evaluate(req, env) if req is not None else True
            if v is True:
                lets |= m
            elif v is False:
                refuses |= m
        runs[c["id"]] = (lets, refuses)
    kinds: dict[tuple[str, tuple[str, ...]], list[str]] = {}  # reasons are shared tuples (rows)
    results = []
    for c, _when, _req in compiled:
        g = group[c["id"]]
        backend = g[0]
        code = c["reason"]["code"]
        # with any_scope, a claim of the same kind is another release's version of this gate, not a rival, unless
        # both are the release's own claims (then the outcome is the verdict's)
        own = _scope_has(c, version)
        explained = 0
        for o, _, _ in compiled:
            if rec_id[o["id"]] == rec_id[c["id"]] and o["id"] != c["id"] and not (
                    any_scope and o["reason"]["code"] == code and not (own and _scope_has(o, version))):
                explained |= runs[o["id"]][1]
        lets, refuses = runs[c["id"]]
        agree, bad, ccs, unknown, seen = 0, 0, set(), 0, 0  # seen: points that test the claim's own call
        for (reasons, cc), at in classes[g].items():
            key = (code, reasons)
            if key not in kinds:
                kinds[key] = of_kind(code, list(reasons), version)
            got = kinds[key]
            for want, pm in ((True, lets), (False, refuses)):
                m = pm & at
                if not m:
                    continue
                if want is False and not got and reasons:
                    continue  # refused for other reasons only: the point did not run, so it says nothing here
                ccs.add(cc)
                if want is False:
                    if got:
                        agree += m.bit_count()
                        seen += m.bit_count()
                    else:
                        bad |= m
                elif not got:
                    agree += m.bit_count()  # the verdict's count, as recorded since OUTCOMES_VERSION 2
                    if not reasons:
                        seen += m.bit_count()  # it ran, as the claim lets it (refused for other reasons: no test)
                    if any(unattributed(r, version) for r in reasons):
                        unknown |= m  # refused in words no claim kind reads: not agreement for the release events
                else:  # vLLM refused it for this claim's kind: as the claim says only where another claim refuses
                    agree += (m & explained).bit_count()
                    bad |= m & ~explained
        wrong = _bits(bad)
        results.append({"claim": c["id"], "agree": agree, "seen": seen,
                        "ran": [points[i] for i in wrong if refuses >> i & 1],
                        "refused": [(points[i], kinds[code, points[i]["reasons"][backend]]) for i in wrong
                                    if not refuses >> i & 1],
                        "ccs": sorted(ccs), "backend": backend,
                        "unattributed": [(points[i], [r for r in points[i]["reasons"][backend]
                                                      if unattributed(r, version)]) for i in _bits(unknown)]})
    return results


def _condition(raw: Any) -> Any:
    """A record's condition (YAML dict) in the solver's compiled form."""
    if raw is None:
        return None
    from pydantic import TypeAdapter

    from kbtool.model.common import Condition
    from kbtool.solve.conditions import compile_condition

    return compile_condition(TypeAdapter(Condition).validate_python(raw))


def _scope_has(claim: dict[str, Any], version: str) -> bool:
    from kbtool.solve.conditions import compare_versions

    ranges = [s for s in claim.get("scope") or [] if s.get("library") == "vllm"]
    if not ranges:
        return False  # a claim with no vLLM version scope is not about a release this probe can name
    for s in ranges:
        lo, fixed, last = s.get("introduced"), s.get("fixed"), s.get("last_affected")
        if lo and compare_versions(version, str(lo)) < 0:
            continue
        if fixed and compare_versions(version, str(fixed)) >= 0:
            continue
        if last and compare_versions(version, str(last)) > 0:
            continue
        return True
    return False


def _label(p: dict[str, Any]) -> str:
    blk = p["block"] if p["block"] is not None else "-"
    return (f"cc{p['cc']} {p['layout']} hd{p['head_size']} {p['dtype']} kv {p['kv']} block {blk}"
            f"{' sinks' if p['sink'] else ''}{' sliding window' if p.get('sliding') else ''}"
            f"{' trtllm' if p['trtllm'] else ''}")


def _points(observations: list[dict[str, Any]]) -> tuple[str | None, list[dict[str, Any]]]:
    """The release and the grid points of the cases' recorded grids, each as the bytes its case's run wrote (the
    case's sha256): the named file, or the copy kept when a later run of the release replaced it; GridSuperseded
    (kbtool.probe.recorded) when neither is there, so a record is never judged against a grid it did not run."""
    version, points = None, []
    for obs in observations:
        m = obs.get("metrics") or {}
        if obs.get("outcome") != "OK" or not m.get("raw"):
            continue
        doc = load(verified(_raw(m["raw"]), m.get("sha256"), str(m["raw"])))
        version = version or str(doc["vllm"])
        points += rows(doc)
    return version, points


def judge(observations: list[dict[str, Any]], env: dict[str, Any]) -> list[dict[str, Any]]:
    return judge_as(engine_claims(), observations)


def judge_as(claims: list[dict[str, Any]], observations: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The verdicts `judge` gives with these claim records (dicts): `kb probe events` asks what a release's evidence
    would say of claims whose scope it proposes to extend over that release, before writing anything."""
    version, points = _points(observations)
    if version is None:
        return []
    out = []
    for r in judge_grid(claims, points, version):
        n_bad = len(r["ran"]) + len(r["refused"])
        clear = r["agree"] + n_bad
        if clear == 0:
            verdict = "inconclusive"
        elif n_bad == 0:
            verdict = "confirmed"
        else:
            verdict = "contradicted"  # design §5: one point against the claim in its scope contradicts it
        parts = [f"{r['agree']} of {clear} grid points as the claim says (vLLM {version}, {r['backend']})"]
        if r["ran"]:
            parts.append(f"vLLM accepted what the claim refuses, e.g. {', '.join(_label(p) for p in r['ran'][:3])}")
        if r["refused"]:
            ex = r["refused"][0]
            parts.append(f"vLLM refused what the claim allows, e.g. {_label(ex[0])}: {ex[1][0]!r}")
        out.append({"claim": r["claim"], "verdict": verdict,
                    "scope": {"vllm": version, "cc": r["ccs"], "gpu": "none (engine probe)"},
                    "detail": "; ".join(parts)})
    return out


def judge_inputs(observations: list[dict[str, Any]]) -> dict[str, list[str]]:
    """What `judge` reads besides its cases (the verdict cache's key, kbtool.probe.rejudge.reads): the claims of every
    subject it may judge as a vLLM backend, the engine-backend records, and the recorded grids the cases name (the
    kept copy where a later run replaced one: kbtool.probe.recorded)."""
    raw = [str(resolved(_raw(m["raw"]), m.get("sha256"))) for o in observations
           if (m := o.get("metrics") or {}).get("raw")]
    return {"subjects": sorted(backends_of()), "kinds": ["engine-backend"], "files": raw}


def summarize(observations: list[dict[str, Any]], env: dict[str, Any]) -> dict[str, Any]:
    """The selection table and per-claim outcomes of the run's grids; {} when a grid was replaced since (the
    record's own summary, written when it ran, is the one that holds)."""
    try:
        version, points = _points(observations)
    except GridSuperseded:
        return {}
    if version is None:
        return {}
    sel = Counter((p["cc"], p["layout"], str(p["selected"])) for p in points)
    table: dict[str, dict[str, int]] = {}
    for (cc, layout, chosen), n in sorted(sel.items()):
        table.setdefault(f"cc{cc} {layout}", {})[chosen] = n
    return {"vllm": version, "grid_points": len(points), "selected": table,
            "raw": sorted({str((o.get("metrics") or {}).get("raw")) for o in observations if o.get("metrics")}),
            "outcomes": release_outcomes(points, version), "outcomes_version": OUTCOMES_VERSION}


OUTCOMES_VERSION = 5


def release_outcomes(points: list[dict[str, Any]], version: str) -> dict[str, dict[str, Any]]:
    """Every engine claim held against this release's grid whatever its version scope says: per claim the
    outcome (holds: every point it gates as it says; fails: some point against it; unattributed: none against it,
    but some point it lets run was refused in words no claim kind reads, so it may or may not hold; none: no point
    tests it, i.e. none it refuses was refused for its kind and none it lets ran, every such point being refused
    for other reasons, as FLASH_ATTN's head-512 block rule of 0.34.0 is at 0.19.1, which refuses head 512 outright)
    and the counts. Not verdicts (a claim is only verified inside its scope): the per-release record the
    version events (kbtool/probe/timeline.py, `kb show CLAIM`) are read from."""
    out: dict[str, dict[str, Any]] = {}
    for r in judge_grid(engine_claims(), points, version, any_scope=True):
        against, unknown = len(r["ran"]) + len(r["refused"]), len(r["unattributed"])
        outcome = "fails" if against else "unattributed" if unknown else "none" if not r["seen"] else "holds"
        entry: dict[str, Any] = {"outcome": outcome, "agree": r["agree"] - unknown, "against": against}
        if unknown:  # points it lets run that vLLM refused in words the probe cannot attribute (issue 46)
            ex, words = r["unattributed"][0]
            entry["unattributed"] = unknown
            entry["unattributed_example"] = f"{_label(ex)}: {words[0]}"
        if r["ran"]:
            entry["accepted"] = _label(r["ran"][0])
        if r["refused"]:
            entry["refused"] = f"{_label(r['refused'][0][0])}: {r['refused'][0][1][0]}"
        out[r["claim"]] = entry
    return out
