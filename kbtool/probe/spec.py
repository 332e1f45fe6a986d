"""Probe specs and probe modules: what a probe declares, and how the runner finds probes.

A probe module (probes/<name>.py) defines `cases()` and `run(case)`, and imports `SPEC` and `judge(cases, env)`
from its judge module (kbtool/probe/judges/<name>.py), which `kb validate` loads alone (judges.py).
GPU libraries are imported inside `run`, never at module import, so listing and judging work anywhere.
"""

from __future__ import annotations

import importlib
import importlib.util
import pkgutil
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

from kbtool.errors import ProbeError

Observation = dict[str, Any]
VerdictDict = dict[str, Any]


@dataclass(frozen=True)
class ProbeSpec:
    """What a probe declares about itself."""

    id: str
    version: int
    claims: list[str]
    requires: dict[str, Any] = field(default_factory=dict)
    """{"archs": [sm ids] or None (any CUDA GPU), "packages": [names from PACKAGES or dist names]}"""
    timeout_s: float = 300.0
    """Per-case limit, JIT compilation included."""
    workers: int = 1
    """Worker processes run at once; >1 only for probes whose cases do not time anything."""
    title: str = ""
    order: int = 50
    """Run order under --all: quick probes first, so a time budget cuts the slow ones, not everything."""
    untestable: str | None = None
    """Why the claims cannot be tested where the required packages are missing (no wheels, ...)."""
    rejudges: tuple[int, ...] = ()
    """Older versions of this probe whose recorded cases the current judge reads (same case parameters)."""

    @property
    def archs(self) -> list[str] | None:
        archs = self.requires.get("archs")
        return list(archs) if archs else None

    @property
    def packages(self) -> list[str]:
        return list(self.requires.get("packages") or [])


@dataclass(frozen=True)
class PackageInfo:
    """How to see that a package is installed without importing it."""

    dist: str
    module: str
    release_file: str | None = None
    """For code that ships inside another package's wheel with no metadata of its own (vLLM's kernel forks,
    unpacked from the vllm wheel without vLLM): a file beside `module`'s package naming the release it came
    from, written by the host script that unpacked it. Its first line is the version."""


# Probe package names -> distribution and a module that exists only if the real thing is installed.
# flash-attn-4 installs flash_attn/cute, so FA-2 is detected by its compiled extension, not `flash_attn`.
PACKAGES: dict[str, PackageInfo] = {
    "torch": PackageInfo("torch", "torch"),
    "flashinfer": PackageInfo("flashinfer-python", "flashinfer"),
    "flash-attn-4": PackageInfo("flash-attn-4", "flash_attn.cute"),
    "flash-attn": PackageInfo("flash-attn", "flash_attn_2_cuda"),
    "flash-attn-3": PackageInfo("flash-attn-3", "flash_attn_interface"),
    "flashmla": PackageInfo("flash-mla", "flash_mla"),
    # a real vLLM install (vllm/entrypoints); vLLM's kernels unpacked alone have a bare vllm/ package
    "vllm": PackageInfo("vllm", "vllm.entrypoints"),
    # vLLM's forks of FlashAttention (FA-3 for sm90, FA-2) and FlashMLA, compiled inside the vllm wheel; their version
    # is the vLLM release whose wheel they came from (probes/host-run.sh writes vllm/KB_RELEASE when it unpacks them)
    "vllm-flash-attn-3": PackageInfo("vllm", "vllm.vllm_flash_attn._vllm_fa3_C", "KB_RELEASE"),
    "vllm-flash-attn-2": PackageInfo("vllm", "vllm.vllm_flash_attn._vllm_fa2_C", "KB_RELEASE"),
    "vllm-flashmla": PackageInfo("vllm", "vllm._flashmla_C", "KB_RELEASE"),
    # the FA-4 that vLLM bundles (CuTe DSL sources under vllm/vllm_flash_attn/cute), packed from a later wheel than
    # the compiled kernels: its release is in its own file (probes/pack_vllm_fa4.sh writes vllm/KB_RELEASE_FA4)
    "vllm-flash-attn-4": PackageInfo("vllm", "vllm.vllm_flash_attn.cute", "KB_RELEASE_FA4"),
    # vLLM's FA-3 fork compiled on the probe host without FP8 two-level accumulation (probes/_fa3_one_level_build.py
    # writes vllm/KB_RELEASE_ONE_LEVEL, naming the fork commit's release)
    "vllm-flash-attn-3-one-level": PackageInfo("vllm", "vllm.vllm_flash_attn._vllm_fa3_C", "KB_RELEASE_ONE_LEVEL"),
    "triton": PackageInfo("triton", "triton"),
    "cudnn-frontend": PackageInfo("nvidia-cudnn-frontend", "cudnn"),
    # Triton's tutorial 06 (python/tutorials/06-fused-attention.py) is no package: a host that has the file puts it
    # on the path under this module name.
    "triton-tutorial": PackageInfo("triton-tutorial", "fused_attention_tutorial"),
}


def package_info(name: str) -> PackageInfo:
    return PACKAGES.get(name, PackageInfo(name, name.replace("-", "_")))


@dataclass
class Judge:
    """A probe's judge module (kbtool/probe/judges/<name>.py): what `kb validate` needs to judge recorded cases
    again, without the program that ran them."""

    spec: ProbeSpec
    judge: Callable[[list[Observation], dict[str, Any]], list[VerdictDict]]
    path: Path | None = None
    summarize: Callable[[list[Observation], dict[str, Any]], dict[str, Any]] | None = None
    """Optional: tables or measured values for the evidence record's `data`."""
    judge_inputs: Callable[[list[Observation]], dict[str, list[str]]] | None = None
    """Optional: what `judge` reads besides its cases and the claims in SPEC.claims (kbtool.probe.rejudge.reads):
    {"subjects": claim subjects whose claims it reads, "kinds": record kinds it reads whole, "files": paths}."""


@dataclass(kw_only=True)
class Probe(Judge):
    """A loaded probe program: its judge, and the cases and run that produce what it judges."""

    module_ref: str
    """Import name (probes.sdpa_gates) or a file path; the worker loads the module from it."""
    cases: Callable[[], list[dict[str, Any]]]
    run: Callable[[dict[str, Any]], Observation]


def _from_module(mod: ModuleType, ref: str) -> Probe:
    missing = [name for name in ("SPEC", "cases", "run", "judge") if not hasattr(mod, name)]
    if missing:
        raise ProbeError(
            f"probe module {ref} lacks {', '.join(missing)}",
            fix="define SPEC, cases(), run(case) and judge(cases, env)",
        )
    spec = mod.SPEC
    if not isinstance(spec, ProbeSpec):
        raise ProbeError(f"probe module {ref}: SPEC is not a ProbeSpec")
    file = getattr(mod, "__file__", None)
    path = Path(file) if file else None
    return Probe(spec=spec, module_ref=ref, cases=mod.cases, run=mod.run, judge=mod.judge, path=path,
                 summarize=getattr(mod, "summarize", None), judge_inputs=getattr(mod, "judge_inputs", None))


def load_module(ref: str) -> ModuleType:
    """Import a probe module by dotted name or by file path."""
    if ref.endswith(".py") or "/" in ref:
        path = Path(ref)
        name = f"_kb_probe_{path.stem}"
        spec = importlib.util.spec_from_file_location(name, path)
        if spec is None or spec.loader is None:
            raise ProbeError(f"cannot load probe file {ref}")
        mod = importlib.util.module_from_spec(spec)
        sys.modules[name] = mod
        spec.loader.exec_module(mod)
        return mod
    return importlib.import_module(ref)


def load_probe(ref: str) -> Probe:
    try:
        mod = load_module(ref)
    except ProbeError:
        raise
    except Exception as exc:  # a broken probe module must not take the command down
        raise ProbeError(f"probe module {ref} failed to import: {type(exc).__name__}: {exc}") from exc
    return _from_module(mod, ref)


def _declares_spec(info: pkgutil.ModuleInfo) -> bool:
    """Whether a module file assigns SPEC at top level or imports it from its judge module (read, not imported)."""
    finder_path = getattr(info.module_finder, "path", None)
    if finder_path is None:
        return True
    path = Path(finder_path) / f"{info.name}.py"
    try:
        text = path.read_text(encoding="utf-8")
    except OSError:
        return True
    return (re.search(r"^SPEC\s*[:=]", text, re.MULTILINE) is not None  # a probe file outside this repository
            or re.search(r"^from kbtool\.probe\.judges\.\w+ import \(?[^)]*?\bSPEC\b", text, re.MULTILINE) is not None)


def judges() -> dict[str, Judge]:
    """probe id -> its judge, from kbtool/probe/judges/ alone (no probe program is imported)."""
    from kbtool.probe import judges as package

    out: dict[str, Judge] = {}
    for info in pkgutil.iter_modules(package.__path__):
        if info.name.startswith("_"):
            continue
        mod = importlib.import_module(f"{package.__name__}.{info.name}")
        spec = getattr(mod, "SPEC", None)
        if not isinstance(spec, ProbeSpec) or not callable(getattr(mod, "judge", None)):
            raise ProbeError(f"judge module {mod.__name__} lacks SPEC or judge",
                             fix="define SPEC = ProbeSpec(...) and judge(cases, env) in it")
        if spec.id in out:
            raise ProbeError(f"duplicate probe id {spec.id!r} in {mod.__name__}")
        out[spec.id] = Judge(spec=spec, judge=mod.judge, path=Path(mod.__file__ or ""),
                             summarize=getattr(mod, "summarize", None), judge_inputs=getattr(mod, "judge_inputs", None))
    return out


def discover(package: str = "probes") -> list[Probe]:
    """Every probe module in the `probes` package, in run order (spec.order, then id)."""
    try:
        pkg = importlib.import_module(package)
    except ImportError as exc:
        raise ProbeError(f"cannot import the probe package {package!r}: {exc}") from exc
    probes = []
    for info in pkgutil.iter_modules(pkg.__path__):
        if info.name.startswith("_") or not _declares_spec(info):
            continue  # helpers beside the probes (plotting, shared GPU code) are not probes
        probes.append(load_probe(f"{package}.{info.name}"))
    ids = [p.spec.id for p in probes]
    dupes = {i for i in ids if ids.count(i) > 1}
    if dupes:
        raise ProbeError(f"duplicate probe ids: {sorted(dupes)}")
    return sorted(probes, key=lambda p: (p.spec.order, p.spec.id))
