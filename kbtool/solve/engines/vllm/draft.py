"""Draft a new vLLM release's engine-release record (records/engine-releases/vllm-X.yaml) from its own evidence: what
`kb probe sweep` writes once the release's vllm-engine-config and vllm-kv-planning probes have run, so a nightly
sweep answers the release's defaults without a hand-written record (issue 46).

Every value is held to the release's recorded points, never guessed:

- defaults and batch tiers: start from the previous recorded release's values, then, field by field, take the
  candidate (the previous value, the values the grid shows) with the fewest mismatches when kb replays every point of
  the release's engine-config grid with the draft (conformance.config_mismatches), until none is left;
- planning: start from the previous release's line, then change one field at a time to the value that removes the
  mismatches of the release's kv-planning grid (conformance.planning_mismatches);
- extensible-cache margins: the grid's release facts.

Each value then says where it came from. A value the evidence shows equal to the previous release's (no other
candidate replays) keeps the previous record's citation, marked carried (that line is the previous release's, not
read in this one). A value that changed cites the probe's evidence (`type: probe`, `ref` the evidence id), with a
note that its code line is not read yet, and is listed in `changed` (the sweep's change report). A value the
evidence does not decide (other values replay alike) is carried with `basis: unverified`, citing the evidence, and
listed in `unpinned`. What no probe shows (start-up checks) is carried with the previous release's citation;
`accounting` is left out (the release is sized as the newest release below it that has one, until boots of it are
read). No code line is ever written that was not read: the only lines cited are the previous record's.
"""

from __future__ import annotations

import re
from pathlib import Path

from kbtool.solve.engines.drafts import DRAFT_MARK as MARK
from kbtool.solve.engines.drafts import ReleaseDraft as Draft
from kbtool.solve.engines.vllm import conformance
from kbtool.solve.engines.vllm import defaults as vd
from kbtool.solve.engines.vllm import planning as vllm_planning
from kbtool.solve.engines.vllm import pool as vllm_pool

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from kbtool.kb import KB
    from kbtool.solve.image import Image

CARRIED_LINE = re.compile(r"carried from vLLM ([0-9][0-9A-Za-z.+-]*)'s line \(([^)]+)\)")
OPTIONAL_BOOLS = ("hybrid_block_at_config", "model_runner_v2_dense", "model_runner_v2_listed_unquantized")
PLANNING_CHOICES: dict[str, tuple[Any, ...]] = {
    "in_flight": ("batched", "batches"), "null_block": (True, False), "checkpoints": (True, False),
    "mamba2_checkpoints": (True, False), "gdn_checkpoints": (True, False), "sliding_v": (True, False),
    "tokens": ("concurrency", "blocks per group"), "hint": ("short", "utilization", "extensible")}
BATCH_KEYS = ("min_memory_gib", "not_device_names", "not_cc", "max_num_batched_tokens", "max_num_seqs")


def _value(fact: Any) -> Any:
    return None if fact is None else fact.value


def previous_record(kb: KB, release: str) -> Any:
    """The newest vLLM engine-release record below `release` (None: none is)."""
    from kbtool.solve.conditions import compare_versions, version_key

    every: list[Any] = kb.of_kind("engine-release")
    recs = [r for r in every if r.engine == "vllm" and compare_versions(r.release, release) < 0]
    return max(recs, key=lambda r: version_key(r.release), default=None)


# ---- the candidate row (the compiled form defaults.py and planning.py read: records.releases) -------------------


def _row(release: str, defaults: dict[str, Any], batch: list[dict[str, Any]], margins: dict[str, Any] | None,
         planning: dict[str, Any] | None) -> dict[str, Any]:
    return {"id": f"vllm-{release}", "release": release,
            "defaults": {k: (None if v is None else (v, "draft")) for k, v in defaults.items()},
            "batch": [tuple([*(t[k] for k in BATCH_KEYS), "draft"]) for t in batch],
            "margins": None if margins is None else {**margins, "source": "draft"},
            "evidence": [], "checks": [],
            "planning": None if planning is None else {k: (v, "draft") for k, v in planning.items()},
            "accounting": None}


def _observed(doc: dict[str, Any], key: str, *, cc10: bool | None = None) -> list[Any]:
    out = []
    for p in doc["rows"]:
        r = p["resolved"]
        if "error" in r:
            continue
        if cc10 is not None and cc10 != str(_cc(doc, p["accelerator"])).startswith("10."):
            continue
        v = r["cudagraph_capture_sizes"]["max"] if key == "capture_max" else r.get(key)
        if key == "cudagraph_mode" and v is not None:
            v = str(v).split(".")[-1]
        if v is not None and v not in out:
            out.append(v)
    return out


def _cc(doc: dict[str, Any], accelerator: str) -> str | None:
    return next((a["cc"] for a in doc["accelerators"] if a["id"] == accelerator), None)


def _candidates(name: str, current: Any, prev: Any, doc: dict[str, Any]) -> list[Any]:
    """The values tried for one defaults field: the previous release's, and what the grid shows."""
    seen: list[Any] = []
    if name in ("async_scheduling", "chunked_prefill", "prefix_caching", "hybrid_prefix_caching",
                "extensible_kv_cache"):
        seen = [True, False]
    elif name in OPTIONAL_BOOLS:
        seen = [None, True]  # absent reads as false
    elif name == "model_runner":
        seen = ["V1", "V2"]
    elif name == "block_size":
        seen = _observed(doc, "block_size")
    elif name == "gpu_memory_utilization":
        seen = _observed(doc, "resolved_gpu_memory_utilization") + _observed(doc, "gpu_memory_utilization")
    elif name == "hybrid_state_cache":
        seen = [v for v in _observed(doc, "mamba_cache_mode") if v != "none"] or ["none"]
    elif name == "cudagraph_mode":
        seen = _observed(doc, "cudagraph_mode")
    elif name == "cudagraph_capture_ceiling":
        seen = _observed(doc, "capture_max", cc10=False)
    elif name in ("cudagraph_capture_ceiling_sm100", "cudagraph_prefill_capture_sm100"):
        seen = [None, *_observed(doc, "capture_max", cc10=True)]
    elif name == "cudagraph_capture_by_architecture":
        seen = [None, *_by_architecture(doc)]
    elif name == "kv_cache_dtype_auto":
        seen = ["model"]
    elif name == "model_runner_v2_architectures":
        seen = [None]
    out: list[Any] = []
    for v in [current, prev, *seen]:
        if name in OPTIONAL_BOOLS and v is False:
            v = None
        if v not in out:
            out.append(v)
    return out


def _by_architecture(doc: dict[str, Any]) -> list[dict[str, int]]:
    """{architecture: its largest capture} for the architectures whose points off the cc 10.x family capture more
    than another architecture on the same device does (a model config that sets its own ceiling)."""
    best: dict[tuple[str, str], int] = {}
    arch_of: dict[str, str] = {}
    for p in doc["rows"]:
        r = p["resolved"]
        if "error" in r or str(_cc(doc, p["accelerator"])).startswith("10."):
            continue
        arch_of[p["model"]] = str(r.get("architecture"))
        best[(p["accelerator"], p["model"])] = int(r["cudagraph_capture_sizes"]["max"] or 0)
    own: dict[str, int] = {}
    for (acc, model), m in best.items():
        others = [v for (a, mo), v in best.items() if a == acc and mo != model]
        if others and m > max(others):
            own[arch_of[model]] = max(own.get(arch_of[model], 0), m)
    return [own] if own else []


def _batch_candidates(prev: list[dict[str, Any]], doc: dict[str, Any], img: Image) -> list[list[dict[str, Any]]]:
    """The previous release's tiers, and the same tiers with the (tokens, seqs) the grid shows on the devices each
    tier takes (where the devices of a tier agree)."""
    out = [prev]
    pairs: dict[int, set[tuple[int, int]]] = {}
    for p in doc["rows"]:
        r = p["resolved"]
        if "error" in r:
            continue
        memory, name, cc = vd.accelerator_facts(img, p["accelerator"])
        if not memory or not cc:
            continue
        rowed = [(*(t[k] for k in BATCH_KEYS), "") for t in prev]
        try:
            i = vd.tier_index({"batch": rowed, "release": doc["vllm"]}, memory, name, cc)
        except ValueError:
            continue
        if r["max_num_batched_tokens"] < r["max_num_seqs"] * p["max_model_len"]:  # not capped by max_model_len
            pairs.setdefault(i, set()).add((int(r["max_num_batched_tokens"]), int(r["max_num_seqs"])))
    if pairs and all(len(v) == 1 for v in pairs.values()):
        revalued = [dict(t) for t in prev]
        for i, v in pairs.items():
            revalued[i]["max_num_batched_tokens"], revalued[i]["max_num_seqs"] = next(iter(v))
        if revalued != prev:
            out.append(revalued)
    return out


# ---- the search ---------------------------------------------------------------------------------------------


def _fit_defaults(img: Image, doc: dict[str, Any], release: str, start: dict[str, Any],
                  prev: dict[str, Any], batch0: list[dict[str, Any]], margins: dict[str, Any] | None
                  ) -> tuple[dict[str, Any], list[dict[str, Any]], int, list[str], list[str]]:
    """(defaults, batch tiers, points, mismatches left, fields the evidence does not decide)."""
    values, batch = dict(start), batch0

    def count(vals: dict[str, Any], tiers: list[dict[str, Any]]) -> tuple[int, list[str]]:
        n, bad = conformance.config_mismatches(img, [doc], _row(release, vals, tiers, margins, None))
        return n, bad

    n, bad = count(values, batch)
    for _ in range(3):
        if not bad:
            break
        for name in vd.FIELDS:
            for cand in _candidates(name, values.get(name), prev.get(name), doc):
                if cand == values.get(name):
                    continue
                _, trial = count({**values, name: cand}, batch)
                if len(trial) < len(bad):
                    values, bad = {**values, name: cand}, trial
        for tiers in _batch_candidates(batch0, doc, img):
            _, trial = count(values, tiers)
            if len(trial) < len(bad):
                batch, bad = tiers, trial
    if values.get("model_runner") == "V2":  # every model gets V2: the per-architecture exceptions say nothing
        for name in ("model_runner_v2_architectures", "model_runner_v2_dense", "model_runner_v2_listed_unquantized"):
            trial_values = {**values, name: None}
            if not count(trial_values, batch)[1] or bad:
                values = trial_values
    unpinned = []
    if values.get("model_runner_v2_architectures") is not None:  # the grid shows only its own models' architectures
        unpinned.append("model_runner_v2_architectures")
    if not bad:
        for name in vd.FIELDS:
            others = [c for c in _candidates(name, values.get(name), prev.get(name), doc) if c != values.get(name)]
            if name not in unpinned and any(not count({**values, name: c}, batch)[1] for c in others):
                unpinned.append(name)
    return values, batch, n, bad, unpinned


def _fit_planning(img: Image, doc: dict[str, Any], release: str, values: dict[str, Any],
                  start: dict[str, Any]) -> tuple[dict[str, Any], int, list[str], list[str]]:
    """(planning line, points, mismatches left, fields the points do not decide): the previous line, one field
    changed at a time where that removes mismatches."""
    rows = vd.rows(img)
    acct = vllm_pool.accounting(release, rows)
    plan = dict(start)

    def count(p: dict[str, Any]) -> tuple[int, list[str]]:
        line = vllm_planning.Planning(release, _row(release, values, [], None, p))
        return conformance.planning_mismatches(img, doc, line, acct)

    n, bad = count(plan)
    for _ in range(3):
        if not bad:
            break
        for name, choices in PLANNING_CHOICES.items():
            for cand in choices:
                if cand == plan.get(name):
                    continue
                _, trial = count({**plan, name: cand})
                if len(trial) < len(bad):
                    plan, bad = {**plan, name: cand}, trial
    unpinned = []
    if not bad:
        for name, choices in PLANNING_CHOICES.items():
            if any(not count({**plan, name: c})[1] for c in choices if c != plan.get(name)):
                unpinned.append(name)
    return plan, n, bad, unpinned


# ---- the record ---------------------------------------------------------------------------------------------


class _Sources:
    """The drafted record's sources: the evidence first, then the previous record's citations it keeps."""

    def __init__(self, prev: Any, release: str) -> None:
        self.prev, self.release = prev, release
        self.items: list[dict[str, Any]] = []
        self._carried: dict[int, int] = {}

    def add(self, entry: dict[str, Any]) -> int:
        self.items.append(entry)
        return len(self.items) - 1

    def carried(self, index: int | None) -> int | None:
        """The previous record's source `index`, copied and marked as the previous release's line."""
        if index is None or index >= len(self.prev.sources):
            return None
        if index not in self._carried:
            s = self.prev.sources[index].model_dump(mode="json", exclude_none=True, exclude_defaults=True)
            s["type"] = str(getattr(self.prev.sources[index].type, "value", self.prev.sources[index].type))
            was = s.get("section")
            s["section"] = (f"{was}; " if was else "") + (f"carried from vLLM {self.prev.release}'s record: "
                                                          f"that release's line, not read in {self.release}")
            self._carried[index] = self.add(s)
        return self._carried[index]


def _where(prev: Any, index: int | None) -> str:
    if index is None or index >= len(prev.sources):
        return "no source"
    s = prev.sources[index]
    if s.path:
        return f"{s.path.removeprefix('vllm/')}:{s.line}" if s.line else s.path
    return str(s.ref or s.url or "?")


def _short(v: Any) -> str:
    return str(v).replace("'", "")


def draft(kb: KB, img: Image, records: Path, root: Path, release: str) -> Draft:
    """The engine-release record of vLLM `release` from its own evidence under `records` (raw grids under
    `root`), against the newest recorded release below it."""
    out = Draft(release)
    prev = previous_record(kb, release)
    if prev is None:
        out.why = f"no vLLM engine-release record below {release} to start from"
        return out
    out.previous = prev.release
    configs = conformance.evidence_grids(records, root, conformance.CONFIG_PROBE, release)
    if not configs:
        out.why = f"no complete vllm-engine-config evidence of vLLM {release} (run the probe first)"
        return out
    doc = configs[-1]
    plans = conformance.evidence_grids(records, root, conformance.PLANNING_PROBE, release)
    pdoc = plans[-1] if plans else None

    prev_defaults = {name: _value(getattr(prev.defaults, name)) for name in vd.FIELDS}
    prev_batch = [{k: getattr(t, k) for k in BATCH_KEYS} for t in prev.batch]
    facts = doc.get("release") or {}
    ext = facts.get("extensible_kv_cache")
    margins = None if not ext else {"floor_bytes": int(ext["KV_CACHE_MARGIN_FLOOR_BYTES"]),
                                    "fraction": float(ext["KV_CACHE_MARGIN_FRACTION"]),
                                    "non_torch_reserve_bytes": int(ext["KV_CACHE_NON_TORCH_RESERVE_BYTES"])}
    values, batch, out.points, bad, unpinned = _fit_defaults(img, doc, release, prev_defaults, prev_defaults,
                                                            prev_batch, margins)
    out.unresolved += bad[:20]
    prev_plan = None if prev.planning is None else {k: _value(getattr(prev.planning, k))
                                                    for k in type(prev.planning).model_fields}
    plan: dict[str, Any] | None = None
    pbad: list[str] = []
    plan_unpinned: list[str] = []
    if pdoc is not None and prev_plan is not None:
        plan, out.planning_points, pbad, plan_unpinned = _fit_planning(img, pdoc, release, values, prev_plan)
        out.unresolved += pbad[:20]

    src = _Sources(prev, release)
    sec = (f"vLLM {release}'s own config resolution (vllm serve) at {out.points} points "
           f"(tests/data/vllm/{release}/engine-config.json.gz), which kb replays with this record with {len(bad)} "
           "mismatches (tests/solve/engines/vllm/test_engine_release.py)")
    s_config = src.add({"type": "probe", "ref": f"evidence/{doc['evidence']}", "section": sec})
    s_plan = None
    if pdoc is not None:
        s_plan = src.add({"type": "probe", "ref": f"evidence/{pdoc['evidence']}",
                          "section": f"the planning points vLLM {release} recorded "
                                     f"(tests/data/vllm/{release}/kv-planning.json.gz), which kb replays with this "
                                     f"line with {len(pbad)} mismatches "
                                     "(tests/solve/test_vllm_planning.py)"})
    not_read = "the code line is not read yet"

    def fact(name: str, value: Any, prev_fact: Any) -> dict[str, Any] | None:
        if value is None:
            return None
        old = _value(prev_fact)
        if name in unpinned:
            out.unpinned.append(name)
            if old == value:
                how = f"carried from vLLM {prev.release}'s record ({_where(prev, getattr(prev_fact, 'source', None))})"
            else:
                out.changed.append((name, old, value))
                how = f"vLLM {prev.release}: {_short(old)}; this is one value the points allow; {not_read}"
            return {"value": value, "basis": "unverified", "source": s_config,
                    "note": f"not decided by vLLM {release}'s evidence (another value replays alike, or its models do "
                            f"not show it): {how}"}
        if prev_fact is not None and old == value:
            out.carried.append(name)
            return {"value": value, "source": src.carried(prev_fact.source),
                    "note": f"carried from vLLM {prev.release}'s record: vLLM {release}'s evidence shows the same "
                            f"value; the cited line is {prev.release}'s"}
        out.changed.append((name, old, value))
        return {"value": value, "basis": "measured", "source": s_config,
                "note": f"vLLM {prev.release}: {_short(old)}; resolved so by vLLM {release}'s own config; "
                        f"{not_read}"}

    defaults = {}
    for name in vd.FIELDS:
        got = fact(name, values.get(name), getattr(prev.defaults, name))
        if got is not None:
            defaults[name] = got
    tiers = []
    same_tiers = batch == prev_batch
    if not same_tiers:
        out.changed.append(("batch", prev_batch, batch))
    else:
        out.carried.append("batch")
    for i, t in enumerate(batch):
        tier = {k: v for k, v in t.items() if v not in (None, [])}
        tier["source"] = (src.carried(prev.batch[i].source) if same_tiers else s_config)
        tiers.append(tier)
    record: dict[str, Any] = {
        "id": f"vllm-{release}", "kind": "engine-release", "name": f"vLLM {release} serving defaults (vllm serve)",
        "engine": "vllm", "release": release, "entry_point": prev.entry_point,
        "evidence": [doc["evidence"], *([pdoc["evidence"]] if pdoc is not None else [])],
        "defaults": defaults, "batch": tiers}
    if margins is not None:
        pm = prev.extensible_margins
        same = pm is not None and {k: getattr(pm, k) for k in margins} == margins
        record["extensible_margins"] = {**margins, "source": src.carried(pm.source) if same and pm else s_config}
        if same:
            out.carried.append("extensible_margins")
        else:
            out.changed.append(("extensible_margins", None if pm is None else {k: getattr(pm, k) for k in margins},
                                margins))
    elif prev.extensible_margins is not None:
        out.changed.append(("extensible_margins", "recorded", None))
    record["startup_checks"] = [{"check": c.check, "raises": c.raises, "message": c.message,
                                 "source": src.carried(c.source)} for c in prev.startup_checks]
    out.unpinned.append("startup_checks")  # no probe records them: a check the release adds is read in its code
    if plan is not None and prev.planning is not None and s_plan is not None:
        record["planning"] = {}
        for name, value in plan.items():
            pf = getattr(prev.planning, name)
            basis = None
            if _value(pf) == value:
                m = CARRIED_LINE.search(pf.note or "")
                whose, line = (m.group(1), m.group(2)) if m else (prev.release, _where(prev, pf.source))
                note = (f"not read in this release's code: carried from vLLM {whose}'s line ({line}); the release's "
                        f"recorded planning points replay on this line with {len(pbad)} mismatches")
                if name in plan_unpinned:
                    out.unpinned.append(f"planning.{name}")
                    basis = "unverified"
                    note += ", and alike with another value: they do not decide it"
            else:
                out.changed.append((f"planning.{name}", _value(pf), value))
                note = (f"vLLM {prev.release}: {_short(_value(pf))}; the release's recorded planning points replay "
                        f"only with this value; {not_read}")
            record["planning"][name] = {"value": value, **({"basis": basis} if basis else {}), "source": s_plan,
                                        "note": note}
    record["sources"] = src.items
    changed = ", ".join(f"{n} {_short(a)} -> {_short(b)}" for n, a, b in out.changed if n != "batch") or "nothing"
    record["notes"] = (
        f"{MARK} from vLLM {release}'s own evidence (the vllm-engine-config grid"
        + (" and the vllm-kv-planning points" if pdoc is not None else "")
        + f"), starting from vLLM {prev.release}'s record. Changed against {prev.release}: {changed}"
        + (" (the batch tiers too)" if not same_tiers else "")
        + ". Values the evidence shows unchanged keep " + prev.release + "'s citations, marked carried; the start-up "
        "checks are carried (no probe makes them); no accounting section (sized as the newest release below it "
        "that has one until boots of this release are read). Read the changed values' code lines and cite them "
        "(CONTRIBUTING, 'adding an engine release').")
    out.record = record
    return out
