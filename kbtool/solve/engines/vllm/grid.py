"""A vLLM release answered from its own recorded selector grid (issue 28).

`kb probe sweep` leaves, for every swept release, the vllm-selector probe's raw grid (tests/data/vllm/X/cc*.json.gz,
and rocm-gfx942.json.gz for the ROCm platform): at each configuration, the backend vLLM's own selector picked,
its priority list and every backend's `validate_configuration` reasons. A release with no priority records in
the KB but a recorded grid is answered from the grid point of the query: what that release did, cited by its
evidence record. A release with neither is answered by the recorded releases around it (`between`): each
one's own choice, named, and "not swept" — never another release's answer in its place.
"""

from __future__ import annotations

from kbtool.solve.conditions import compare_versions, neighbours, version_key

TYPE_CHECKING = False  # selection.py imports this module on every vLLM query: pathlib, gzip, json where a grid is read
if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path
    from typing import Any

    from kbtool.solve.engines.vllm.selected import Selection
    from kbtool.solve.image import Image

LAYOUT_OF = {"gqa": "dense", "mha": "dense", "mqa": "dense", "mla": "mla", "sparse-mla": "sparse"}
SLIDING_FROM = "0.26.0"
"""The first release whose selector reads a layer's sliding window (AttentionSelectorConfig.has_sliding_window,
vllm/v1/attention/selector.py; each backend's validate_configuration refuses it unless supports_sliding_window):
read in the 0.26.0, 0.33.0 and 0.34.0 wheels; 0.24.0's and 0.25.1's selector.py have no such field (issue 46)."""
DTYPE_OF = {"bf16": "bfloat16", "fp16": "float16"}
ROCM_ARCH = "gfx942"


def folders() -> list[Path]:
    """Where recorded grids live: the checkout's tests/data/vllm, else the installed copy's kbtool/_data/vllm."""
    from pathlib import Path

    import kbtool
    from kbtool.paths import records_dir

    return [records_dir().parent / "tests" / "data" / "vllm", Path(kbtool.__file__).parent / "_data" / "vllm"]


# What this process has read, by function and argument (dicts, not functools.cache: the warm query imports this
# module and not functools).
_MEMO: dict[tuple[str, Any], Any] = {}


def recorded() -> tuple[str, ...]:
    """Releases with a recorded CUDA grid, oldest first."""
    if ("recorded", None) not in _MEMO:
        found = {p.name for f in folders() if f.is_dir() for p in f.iterdir() if any(p.glob("cc*.json.gz"))}
        _MEMO["recorded", None] = tuple(sorted(found, key=version_key))
    return _MEMO["recorded", None]  # type: ignore[no-any-return]


def _file(version: str, name: str) -> Path | None:
    for f in folders():
        p = f / version / name
        if p.is_file():
            return p
    return None


def _load(path: Path) -> dict[str, Any]:
    if ("load", path) not in _MEMO:
        import gzip
        import json

        with gzip.open(path, "rt", encoding="utf-8") as fh:
            _MEMO["load", path] = json.load(fh)
    return _MEMO["load", path]  # type: ignore[no-any-return]


def evidence_id(version: str, probe: str = "vllm-selector") -> str | None:
    """The newest evidence record of `probe` for the vLLM release (kbtool/solve/installs.py)."""
    from kbtool.solve.installs import evidence_id as newest

    return newest("vllm", version, probe)


def _grid(version: str, env: dict[str, Any], platform: str) -> tuple[Path, str] | None:
    """The release's recorded grid file for the query's device and the device's key in it (the ROCm arch, or the
    compute capability as "9.0"); None where none is recorded."""
    if platform == "rocm":
        key = ROCM_ARCH
        path = _file(version, f"rocm-{ROCM_ARCH}.json.gz")
    else:
        cc = env.get("cc")
        if not isinstance(cc, (int, float)):
            return None
        key = f"{float(cc):.1f}"
        path = _file(version, f"cc{key}.json.gz")
    return (path, key) if path is not None else None


GRID_FIX = "add the compute capability to probes/_vllm_grid.py's CCS and run `kb probe sweep --lib vllm --force`"


def capabilities(version: str) -> list[str]:
    """The compute capabilities the release's recorded CUDA grids cover, as "8.6", lowest first."""
    found = {p.name[2:-len(".json.gz")] for f in folders() if (f / version).is_dir()
             for p in (f / version).glob("cc*.json.gz")}
    return sorted(found, key=lambda c: tuple(int(x) for x in c.split(".")))


def off_grid(version: str, env: dict[str, Any]) -> str:
    """Why a CUDA device has no recorded grid point: its compute capability (or none known) is not among the
    release's grids. Worded as a dependency, never as vLLM's refusal: the sweep did not ask that device."""
    cc = env.get("cc")
    have = ", ".join(capabilities(version)) or "none"
    what = f"compute capability {float(cc):.1f}" if isinstance(cc, (int, float)) else "the device's compute capability"
    return (f"depends on {what}, which vLLM {version}'s selector reads and its recorded grids do not cover "
            f"(recorded at {have}); {GRID_FIX}")


def point(version: str, env: dict[str, Any], platform: str = "cuda") -> dict[str, Any] | None:
    """The recorded grid point of the query's configuration, or None (not recorded, or an axis off the grid)."""
    found = _grid(version, env, platform)
    if found is None:
        return None
    path, key = found
    doc = _load(path)
    want = [key, bool(env.get("trtllm_kernels", True)) and platform == "cuda",
            LAYOUT_OF.get(str(env.get("attention") or "gqa")), env.get("head_dim"),
            DTYPE_OF.get(str(env.get("dtype") or "bf16")), str(env.get("kv_cache_dtype") or "auto"),
            env.get("block_size"), bool(env.get("sinks", False))]
    mm = bool(env.get("mm_prefix", False))
    swa = sliding(env)
    asked = "sliding_window" in (doc.get("columns") or [])
    for r in doc["rows"]:
        # the 12th column, use_mm_prefix (probe version 4, issue 44); a row without it ran vLLM's default, False.
        # The 13th, has_sliding_window (version 5, issue 46), where the release's selector has the field; a grid
        # without it is read at the model's window only where the release's selector does not read one (unasked)
        if r[:8] == want and bool(r[11] if len(r) > 11 else False) == mm and (
                not asked or bool(r[12]) == swa):
            sets, reasons = doc["reason_sets"], doc["reasons"]
            per = {n: [reasons[i] for i in sets[s]] for n, s in zip(doc["backends"], r[10], strict=True) if s >= 0}
            return {"selected": r[8], "priority": list(doc["priorities"][r[9]]), "reasons": per,
                    "file": path.name, "commit": doc.get("commit")}
    return None


def off_axis(version: str, env: dict[str, Any], platform: str = "cuda") -> tuple[str, str, str] | None:
    """The first input of the query outside the values the release's recorded grid asks (the model dtype, the head
    size, the KV dtype, the block size), as (name, value as asked, the values asked); None where each is asked."""
    found = _grid(version, env, platform)
    if found is None:
        return None
    grid = _load(found[0]).get("grid") or {}
    layout = LAYOUT_OF.get(str(env.get("attention") or "gqa"))
    kvs = grid.get("kv_mla" if layout in ("mla", "sparse") else "kv_dense")
    asked = [("the model dtype", DTYPE_OF.get(str(env.get("dtype") or "bf16"), str(env.get("dtype"))),
              grid.get("dtype")),
             ("head size", env.get("head_dim"), grid.get("head_size")),
             ("KV cache dtype", str(env.get("kv_cache_dtype") or "auto"), kvs),
             ("block size", env.get("block_size"), grid.get("block"))]
    for name, value, values in asked:
        if isinstance(values, list) and value not in values:
            return name, str(value), ", ".join(str(v) for v in values)
    return None


def has_mm_axis(version: str, env: dict[str, Any], platform: str = "cuda") -> bool:
    """Whether the release's recorded grid for the query's device asks use_mm_prefix (a `mm_prefix` column,
    asked at dense points where the release's AttentionSelectorConfig has the field)."""
    found = _grid(version, env, platform)
    if found is None:
        return False
    doc = _load(found[0])
    return "mm_prefix" in (doc.get("columns") or []) and (doc.get("grid") or {}).get("mm_prefix") == "dense only"


def sliding(env: dict[str, Any]) -> bool:
    """Whether the query's layers have a sliding window (the model's `sliding_window`, 0 or absent: none)."""
    w = env.get("sliding_window")
    return isinstance(w, (int, float)) and w > 0


def sliding_unasked(version: str, env: dict[str, Any], platform: str = "cuda") -> bool:
    """Whether the query has a sliding window that the release's selector reads (SLIDING_FROM on) but its recorded
    grid for the query's device does not ask (a grid of probe version < 5, or the ROCm grid): there the grid's
    point is not vLLM's, and the answer depends on the sweep that records it."""
    from kbtool.solve.conditions import compare_versions

    if not sliding(env) or compare_versions(version, SLIDING_FROM) < 0:
        return False
    found = _grid(version, env, platform)
    return found is not None and "sliding_window" not in (_load(found[0]).get("columns") or [])


def select_unrecorded(img: Image, env: dict[str, Any], version: str, requested: str | None,
                      platform: str, ask: Callable[[str], Selection]) -> Selection:
    """selection.select for a release with no priority records: its recorded grid point, else what `ask` (the
    selection of a recorded release) gives for the releases around it."""
    from kbtool.solve.engines.vllm.selected import Selection, versions

    if version not in recorded():
        known = sorted(set(versions(img)) | set(recorded()), key=version_key)
        sides = []
        for v in neighbours(version, known):
            if v is not None:
                s = ask(v)
                name = s.checks[s.selected].name if s.selected in s.checks else s.selected
                word = (f"selects {name}" if s.selected else str(s.error).partition(";")[0]
                        if str(s.error).startswith("depends on") else f"refuses: {s.error}")
                sides.append((v, word))
        below, above = neighbours(version, known)
        if below and above:
            text = f"between {below} ({sides[0][1]}) and {above} ({sides[1][1]}): not swept"
        elif sides:
            where = "after the newest" if below else "before the oldest"
            text = f"{where} recorded release {sides[0][0]} ({sides[0][1]}): not swept"
        else:
            text = "no vLLM release is recorded"
        return Selection(version, [], {}, None, requested, None, between=text,
                         source=f"run `kb probe sweep --lib vllm --releases {version}` to record it")
    return from_grid(img, env, version, requested, platform)


def from_grid(img: Image, env: dict[str, Any], version: str, requested: str | None, platform: str) -> Selection:
    """The release's recorded grid point of the query, as vLLM's selection there (cited by its evidence)."""
    from kbtool.solve import installs
    from kbtool.solve.engines.vllm.selected import BackendCheck, Selection
    from kbtool.solve.gates import structural

    backends = {b.id: b for b in img.backends("vllm")}
    by_name = {b.backend_name.upper(): b.id for b in backends.values()}
    eid = evidence_id(version)
    source = f"vLLM {version}'s own selector grid ({eid or 'tests/data/vllm/' + version})"
    if env.get("mm_prefix"):
        source += ", at use_mm_prefix True"
    if eid and (over := installs.install_overrides(eid)):  # the release's own pins did not resolve (issue 46)
        source += f", installed with override {', '.join(over)}"
    if sliding_unasked(version, env, platform):
        fix = f"run `kb probe sweep --lib vllm --releases {version} --force` to record it"
        return Selection(version, [], {}, None, requested,
                         f"depends on has_sliding_window (the model's sliding-window layers), which vLLM {version}'s "
                         f"selector reads and its recorded grid does not ask; {fix}", source=fix)
    if sliding(env) and point(version, env, platform) is not None and compare_versions(version, SLIDING_FROM) >= 0:
        source += ", at has_sliding_window True"
    p = point(version, env, platform)
    if p is None and platform == "cuda" and _grid(version, env, platform) is None:
        return Selection(version, [], {}, None, requested, off_grid(version, env), source=GRID_FIX)
    if p is None:
        off = off_axis(version, env, platform)
        if off is not None:  # an input the selector reads that the sweep did not ask: its answer depends on it
            fix = "add the value to probes/_vllm_grid.py's grid and run `kb probe sweep --lib vllm --force`"
            return Selection(version, [], {}, None, requested,
                             f"depends on {off[0]} {off[1]}, which vLLM {version}'s selector reads and its recorded "
                             f"grid does not ask (it asks {off[2]}); {fix}", source=fix)
        return Selection(version, [], {}, None, requested,
                         f"vLLM {version}'s recorded grid has no point for this configuration", source=source)
    names = list(p["priority"])
    if requested and requested.upper() not in names:
        names.append(requested.upper())
    checks = {}
    for name in names:
        bid = by_name.get(name)
        if bid is None or name not in p["reasons"]:
            continue
        rs = p["reasons"][name]
        checks[bid] = BackendCheck(bid, name, "rejected" if rs else "ok",
                                   [structural("VLLM", m, "engine", subject=bid) for m in rs])
    order = [by_name[n] for n in p["priority"] if n in by_name]
    if requested:
        rid = by_name.get(requested.upper())
        if rid is None or rid not in checks:
            return Selection(version, order, checks, None, requested, f"unknown attention backend {requested!r}",
                             source=source)
        c = checks[rid]
        if c.valid:
            return Selection(version, order, checks, rid, requested, source=source)
        return Selection(version, order, checks, None, requested,
                         f"Selected backend AttentionBackendEnum.{c.name} is not valid for this configuration. "
                         f"Reason: {[r.message for r in c.reasons]}", source=source)
    chosen = by_name.get(str(p["selected"])) if p["selected"] else None
    error = None if chosen else f"No valid attention backend found for {platform}"
    return Selection(version, order, checks, chosen, None, error, source=source)
