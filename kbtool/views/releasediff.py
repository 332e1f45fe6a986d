"""`kb diff --ENGINE A B`: why a pool or a backend changed between two recorded releases of a serving engine.

Four parts, each from what is recorded, none filled in from another release:

- defaults: the two releases' `engine-release` records, field by field (every `defaults` fact, the batch tiers,
  the extensible-cache margins), each change with B's source (repo path:line at B's commit); a release without a
  record says so;
- engine: what the engine's own recordings say changed (Engine.release_changes: for vLLM its selector grids'
  backends and selections per compute capability, and its config resolution's release facts);
- gates: claims whose outcome on the two releases' own grids differs (the engine's release timeline: holds,
  fails, unattributed), read from the evidence before any scope is rewritten;
- claims: claims whose version scope for the engine's library holds at one release and not the other;
- question (with --gpu): the same query solved under each release, side by side, and which changed default or
  accounting moved the pool.

Neutral: the engine is a parameter; its own code answers through the engine contract (kbtool/solve/engines/base.py).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from kbtool.errors import UsageError
from kbtool.kb import KB
from kbtool.solve.engines.results import ReleaseChange

# defaults (record field names) that size each part of the pool; the `_sm100` ones only on the cc 10.x family
RESERVE = ("model_runner", "model_runner_v2_architectures", "model_runner_v2_dense", "cudagraph_mode",
           "cudagraph_capture_ceiling", "cudagraph_capture_ceiling_sm100", "cudagraph_prefill_capture_sm100",
           "cudagraph_capture_by_architecture", "extensible_kv_cache")


@dataclass(frozen=True)
class FieldChange:
    """One field of the engine-release records that differs: where (defaults / batch / extensible_margins)."""

    part: str
    field: str
    old: Any
    new: Any
    source: str | None  # B's source: repo path:line (commit), or A's where B has none
    note: str | None = None  # B's note on the value


@dataclass(frozen=True)
class ClaimChange:
    claim: str
    statement: str
    at_a: bool
    at_b: bool
    scope: str  # the library's range(s), as recorded
    why: str  # introduced / fixed (a recorded bound between them) / unconfirmed (past its last recorded release)


@dataclass(frozen=True)
class GateChange:
    """A claim whose outcome on the release's own grid differs between the two releases."""

    claim: str
    old: str  # holds | fails | unattributed | none | not judged (the release has no outcome for it)
    new: str
    evidence: str | None  # B's evidence (A's where B has none)
    detail: str


@dataclass(frozen=True)
class Side:
    """One release's answer to the question."""

    release: str
    verdict: str | None
    state: str | None  # selected / error / not_recorded / depends
    prefill: str | None
    decode: str | None
    error: str | None
    between: str | None  # a release the engine has no selection for: the recorded ones around it
    block_size: Any
    max_num_batched_tokens: str | None
    utilization: float | None
    reserve_bytes: int | None
    reserve_words: str | None  # the accounting's own words for the reserve
    pool_bytes: int | None
    pool_tokens: int | None  # the engine's reported pool (its start-up line), else kb's
    num_blocks: int | None
    concurrency: float | None
    starts: bool | None
    accounting: str | None
    planning: str | None  # the release's planning line (kbtool/solve/engines/vllm/planning.py)
    padding: list[str]
    preflight: str | None


@dataclass(frozen=True)
class Question:
    gpu: str
    model: str | None
    a: Side
    b: Side
    moved: list[str]  # what moved the pool (or the backend), in words


@dataclass(frozen=True)
class ReleaseDiff:
    engine: str
    label: str
    a: str
    b: str
    records: dict[str, bool]  # release -> has an engine-release record
    defaults: list[FieldChange]
    changes: list[ReleaseChange]
    claims: list[ClaimChange]
    question: Question | None = None
    notes: list[str] = field(default_factory=list)
    gates: list[GateChange] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        out = asdict(replace(self, changes=[]))  # ReleaseChange is no dataclass: asdict would deep-copy it
        out["changes"] = [c.to_dict() for c in self.changes]
        return out


def _record(kb: KB, engine: str, release: str) -> Any:
    recs: list[Any] = kb.of_kind("engine-release")
    return next((r for r in recs if r.engine == engine and r.release == release), None)


def recorded(kb: KB, img: Any, engine: str) -> list[str]:
    """Releases with an engine-release record or the engine's own recordings, oldest first."""

    from kbtool.solve.conditions import version_key
    from kbtool.solve.engines import registry

    recs: list[Any] = kb.of_kind("engine-release")
    found = {r.release for r in recs if r.engine == engine}
    found |= set(registry.ENGINES[engine].recorded_releases(img))
    return sorted(found, key=version_key)


def _where(rec: Any, index: int | None) -> str | None:
    if index is None or index >= len(rec.sources):
        return None
    s = rec.sources[index]
    path = getattr(s, "path", None) or getattr(s, "ref", None) or "?"
    line = getattr(s, "line", None)
    commit = getattr(s, "commit", None)
    return f"{path}{f':{line}' if line else ''}{f' ({commit})' if commit else ''}"


def _value(fact: Any) -> Any:
    return fact.value if hasattr(fact, "value") else fact


def _line(kb: KB | None, rec: Any, part: str) -> Any:
    """The record whose `part` section (planning, accounting) `rec`'s release takes: its own, else the newest record
    of the engine below it that has one (a patch release borrows its accounting; solve/engines/vllm/records.py
    line_release reads the same)."""
    if kb is None or getattr(rec, part, None) is not None:
        return rec
    from kbtool.solve.conditions import compare_versions, version_key

    recs: list[Any] = kb.of_kind("engine-release")
    below = [r for r in recs if r.engine == rec.engine and getattr(r, part, None) is not None
             and compare_versions(r.release, rec.release) <= 0]
    return max(below, key=lambda r: version_key(r.release), default=rec)


def defaults_diff(ra: Any, rb: Any, kb: KB | None = None) -> list[FieldChange]:
    """Every field of the two records that differs, with B's source (A's when B lacks the field). With `kb`, a
    release without its own planning or accounting section is compared with the line it borrows (the source then
    names the release that records it)."""
    out: list[FieldChange] = []
    names = list(type(ra.defaults).model_fields)
    for name in names:
        fa, fb = getattr(ra.defaults, name), getattr(rb.defaults, name)
        va, vb = (None if f is None else _value(f) for f in (fa, fb))
        if va != vb:
            src = _where(rb, fb.source) if fb is not None else f"{ra.release}: {_where(ra, fa.source)}"
            out.append(FieldChange("defaults", name, va, vb, src, getattr(fb, "note", None)))
    keys = ("min_memory_gib", "not_device_names", "not_cc", "max_num_batched_tokens", "max_num_seqs")
    for i in range(max(len(ra.batch), len(rb.batch))):
        ta = ra.batch[i] if i < len(ra.batch) else None
        tb = rb.batch[i] if i < len(rb.batch) else None
        da = {k: getattr(ta, k) for k in keys} if ta else None
        db = {k: getattr(tb, k) for k in keys} if tb else None
        if da != db:
            src = _where(rb, tb.source) if tb else _where(ra, ta.source if ta else None)
            out.append(FieldChange("batch", f"tier {i + 1}", da, db, src))
    for part in ("planning", "accounting"):  # vLLM's planning and accounting lines (None: borrowed from an older one)
        la, lb = _line(kb, ra, part), _line(kb, rb, part)
        sa, sb = getattr(la, part, None), getattr(lb, part, None)
        if sa is None or sb is None or la is lb:  # not recorded, or both releases take the same line
            continue
        for name in type(sa).model_fields:
            if name == "measured":  # which line kb's boots measured: kb's, not the engine's
                continue
            fa, fb = getattr(sa, name), getattr(sb, name)
            va, vb = (None if f is None else _value(f) for f in (fa, fb))
            if va != vb:
                if fb is None:
                    src = f"{la.release}: {_where(la, fa.source)}"
                else:
                    src = _where(lb, fb.source) if lb is rb else f"{lb.release}: {_where(lb, fb.source)}"
                out.append(FieldChange(part, name, va, vb, src, getattr(fb, "note", None)))
    ma, mb = ra.extensible_margins, rb.extensible_margins
    for k in ("floor_bytes", "fraction", "non_torch_reserve_bytes"):
        va, vb = (getattr(m, k) if m else None for m in (ma, mb))
        if va != vb:
            out.append(FieldChange("extensible_margins", k, va, vb, _where(rb, mb.source) if mb else None))
    return out


def claims_diff(kb: KB, library: str, a: str, b: str) -> list[ClaimChange]:
    """Claims whose scope for `library` holds at one release and not at the other."""
    from kbtool.probe.scoping import in_range

    out = []
    claims: list[Any] = kb.of_kind("claim")
    for c in claims:
        ranges = [r for r in c.scope if r.library == library]
        if not ranges:
            continue
        at_a, at_b = any(in_range(a, r) for r in ranges), any(in_range(b, r) for r in ranges)
        if at_a != at_b:
            words = "; ".join(", ".join(f"{k} {getattr(r, k)}" for k in ("introduced", "last_affected", "fixed")
                                        if getattr(r, k)) or "all" for r in ranges)
            out.append(ClaimChange(c.id, c.statement, at_a, at_b, words, _why(ranges, a, b)))
    return sorted(out, key=lambda x: (x.at_a, x.claim))


NOT_JUDGED = "not judged"


def gates_diff(kb: KB, engine: str, a: str, b: str) -> list[GateChange]:
    """Claims whose outcome on A's grid differs from B's (the release timeline, kbtool/solve/engines/vllm/timeline.py:
    an engine whose probe records no per-release outcomes has none). A claim only one release judges is listed
    when the other release has outcomes at all (a claim new or gone between them)."""
    from kbtool.solve.engines.vllm import timeline as tl

    lines = tl.timelines(kb, engine)
    have = {p.release for pts in lines.values() for p in pts}
    if a not in have or b not in have:
        return []
    out = []
    for cid, points in sorted(lines.items()):
        at = {p.release: p for p in points}
        pa, pb = at.get(a), at.get(b)
        old, new = (p.outcome if p else NOT_JUDGED for p in (pa, pb))
        if old != new:
            last = pb or pa
            out.append(GateChange(cid, old, new, last.evidence if last else None, last.detail if last else ""))
    order = {"fails": 0, "unattributed": 1, "holds": 2}
    return sorted(out, key=lambda g: (order.get(g.new, 3), g.claim))


def _why(ranges: list[Any], a: str, b: str) -> str:
    """introduced or fixed: a recorded bound lies between the releases; unconfirmed: the later one is only past
    the last release the claim was recorded to hold at (last_affected), not recorded as fixed."""
    from kbtool.solve.conditions import compare_versions

    lo, hi = (a, b) if compare_versions(a, b) <= 0 else (b, a)
    for r in ranges:
        for bound, kind in ((r.introduced, "introduced"), (r.fixed, "fixed")):
            if bound and compare_versions(lo, bound) < 0 <= compare_versions(hi, bound):
                return kind
    return "unconfirmed"


def _side(release: str, answer: dict[str, Any]) -> Side:
    eng = answer.get("engine") or {}
    mem = answer.get("memory") or {}
    rep = mem.get("engine_report") or {}
    formula = str(mem.get("formula") or "")
    i = formula.find("- reserve ")
    reserve_words = formula[i + 2:formula.find("; =", i)] if i >= 0 else None
    assumed = answer.get("assumed") or {}
    return Side(
        release=release, verdict=answer.get("verdict"), state=eng.get("state"), prefill=eng.get("prefill"),
        decode=eng.get("decode"), error=eng.get("error"), between=eng.get("between"),
        block_size=rep.get("block_size") or eng.get("page_size") or assumed.get("block_size"),
        max_num_batched_tokens=assumed.get("max_num_batched_tokens"), utilization=mem.get("utilization"),
        reserve_bytes=mem.get("reserve_bytes"), reserve_words=reserve_words, pool_bytes=mem.get("available_bytes"),
        pool_tokens=rep.get("kv_cache_tokens") or mem.get("pool_tokens"), num_blocks=rep.get("num_blocks"),
        concurrency=rep.get("max_concurrency"), starts=(mem.get("fits") if mem else None),
        accounting=rep.get("accounting"), planning=rep.get("planning"), padding=list(rep.get("padding") or []),
        preflight=eng.get("preflight"))


def _gb(n: int) -> str:
    return f"{n / 1e9:.2f} GB"


def moved(a: Side, b: Side, defaults: list[FieldChange], cc: str | None) -> list[str]:
    """What moved the pool or the backend between the two answers, naming the changed defaults behind it."""
    changed = {c.field: c for c in defaults if c.part == "defaults"}
    applies = [n for n in RESERVE if n in changed and (not n.endswith("_sm100") or (cc or "").startswith("10."))]
    out: list[str] = []
    if (a.prefill, a.decode) != (b.prefill, b.decode):
        for s in (a, b):
            if s.state not in (None, "selected"):
                why = s.between or (s.error if s.state == "depends" else None)  # use_mm_prefix not recorded
                out.append(f"backend: no selection for {s.release} ({s.state}" + (f": {why}" if why else "") + ")")
        if a.state == b.state == "selected":
            out.append(f"backend: {a.prefill}/{a.decode} -> {b.prefill}/{b.decode} (the selector's choice; see the "
                       "backends section)")
    if a.utilization != b.utilization:
        c = changed.get("gpu_memory_utilization")
        out.append(f"budget: gpu_memory_utilization {a.utilization} -> {b.utilization}"
                   + (f" (the changed default, {c.source})" if c else ""))
    if a.block_size != b.block_size:
        c = changed.get("block_size")
        out.append(f"block size {a.block_size} -> {b.block_size}" + (f" (the changed default, {c.source})" if c
                                                                      else " (forced by the backend)"))
    ba, bb = (str(x.max_num_batched_tokens or "").split(" (")[0] for x in (a, b))
    if ba != bb:
        out.append(f"batch defaults on this GPU: max_num_batched_tokens {ba} -> {bb}")
    if a.reserve_bytes is not None and b.reserve_bytes is not None and a.reserve_bytes != b.reserve_bytes:
        why = "; ".join(f"{n} {_short(changed[n].old)} -> {_short(changed[n].new)} ({changed[n].source})"
                        for n in applies)
        step = b.reserve_bytes - a.reserve_bytes
        out.append(f"reserve {_gb(a.reserve_bytes)} -> {_gb(b.reserve_bytes)} ({step:+,} B)"
                   + (f": changed defaults {why}" if why else ": no changed default behind it (the accounting)"))
    if a.padding != b.padding:
        out.append(f"KV layout: {'; '.join(a.padding) or 'no padding'} -> {'; '.join(b.padding) or 'no padding'}")
    if a.pool_tokens and b.pool_tokens and a.num_blocks and b.num_blocks and a.block_size and b.block_size:
        ta, tb = a.pool_tokens / a.num_blocks, b.pool_tokens / b.num_blocks
        if abs(ta / a.block_size - tb / b.block_size) > 0.005:  # per block slot: a block size change is above
            out.append(f"tokens reported per block {ta:.2f} -> {tb:.2f} ({a.num_blocks:,} -> {b.num_blocks:,} "
                       f"blocks): the release's own report of the pool (planning {a.planning} -> {b.planning}, "
                       f"accounting {a.accounting} -> {b.accounting}), "
                       "not a default")
    if a.pool_tokens != b.pool_tokens and not out:
        out.append("the pool moved with no changed default or reserve recorded behind it")
    return out


def _short(v: Any) -> str:
    text = json.dumps(v, default=str) if not isinstance(v, str) else v
    return text if len(text) <= 60 else text[:57] + "..."


def diff(kb: KB, img: Any, engine: str, a: str, b: str, gpu: str | None = None,
         **question: Any) -> ReleaseDiff:
    """The two releases compared; UsageError (exit 2) for a release nothing is recorded of."""
    from kbtool.solve.engines import registry

    eng = registry.ENGINES[engine]
    known = recorded(kb, img, engine)
    for v in (a, b):
        if v not in known:
            raise UsageError(f"{eng.release_flag()} {v}: no {eng.label} release {v} is recorded",
                             fix=f"record it with `kb probe sweep --lib {engine} --releases {v}`, or compare two "
                             f"recorded releases: {', '.join(known) or 'none'}")
    ra, rb = _record(kb, engine, a), _record(kb, engine, b)
    recs: list[Any] = kb.of_kind("engine-release")
    if ra is None and rb is None and not any(r.engine == engine for r in recs):
        # an engine whose defaults live in its own recorded resolution, not in engine-release records (SGLang)
        notes = [f"{eng.label} keeps no engine-release records: its defaults are compared under launch defaults, "
                 "from its own recorded resolution"]
    else:
        notes = [f"{v}: no engine-release record (records/engine-releases); its defaults are not compared"
                 for v, r in ((a, ra), (b, rb)) if r is None]
    defaults = defaults_diff(ra, rb, kb) if ra is not None and rb is not None else []
    out = ReleaseDiff(engine=engine, label=eng.label, a=a, b=b, records={a: ra is not None, b: rb is not None},
                      defaults=defaults, changes=eng.release_changes(img, a, b),
                      claims=claims_diff(kb, engine, a, b), notes=notes, gates=gates_diff(kb, engine, a, b))
    if gpu is None:
        return out
    return ReleaseDiff(**{**out.__dict__, "question": ask(img, engine, a, b, gpu, defaults, **question)})


@dataclass(frozen=True)
class SweepReport:
    """What changed at each release a sweep recorded, against the release recorded before it."""

    engine: str
    diffs: list[ReleaseDiff]
    notes: list[str]  # a release with nothing recorded before it, or nothing recorded at all

    def to_dict(self) -> dict[str, Any]:
        return {"engine": self.engine, "diffs": [d.to_dict() for d in self.diffs], "notes": self.notes}


def sweep_report(kb: KB, img: Any, engine: str, releases: list[str]) -> SweepReport:
    """`kb probe sweep`'s closing report: for each swept release, `diff` against the newest recorded release
    before it (the same comparison as `kb diff`, one implementation)."""
    from kbtool.solve.conditions import compare_versions

    known = recorded(kb, img, engine)
    diffs, notes = [], []
    for r in releases:
        if r not in known:
            notes.append(f"{r}: nothing recorded (the sweep did not complete it)")
            continue
        before = [v for v in known if compare_versions(v, r) < 0]
        if not before:
            notes.append(f"{r}: no release recorded before it to compare with")
            continue
        diffs.append(diff(kb, img, engine, before[-1], r))
    return SweepReport(engine, diffs, notes)


def ask(img: Any, engine: str, a: str, b: str, gpu: str, defaults: list[FieldChange], **opts: Any) -> Question:
    """The same question under each release, side by side."""
    from kbtool.solve.answer import to_json
    from kbtool.solve.request import build_query
    from kbtool.solve.solver import solve

    sides = []
    for v in (a, b):
        asked: dict[str, Any] = {**opts, engine: v}
        ans = solve(img, build_query(gpu=gpu, engine=engine, **asked))
        if not hasattr(ans, "engine"):
            raise UsageError(f"--gpu {gpu}: names more than one accelerator", fix="name one, e.g. --gpu h100")
        sides.append(_side(v, json.loads(to_json(ans))))
    cc = _cc(img, gpu)
    return Question(gpu=gpu, model=opts.get("model"), a=sides[0], b=sides[1],
                    moved=moved(sides[0], sides[1], defaults, cc))


def _cc(img: Any, gpu: str) -> str | None:
    try:
        acc = img.accelerator(img.resolve(gpu, "accelerator", "--gpu"))
    except (KeyError, UsageError):
        return None
    cc = img.cc.get(acc.architecture)
    return str(cc) if cc else None
