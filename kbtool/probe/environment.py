"""The environment fingerprint: GPU, compute capability, SMs, memory, driver, CUDA, torch, library versions.

`fingerprint()` collects it in a subprocess (so the parent never initialises CUDA), `python -m
kbtool.probe.environment` prints it as JSON. The mappings from GPU names and compute capabilities to the
KB's accelerator and architecture ids are pure functions.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import platform
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

from kbtool.probe.spec import PACKAGES, PackageInfo, package_info

ARCH_BY_CC = {
    "7.5": "sm75",
    "8.0": "sm80",
    "8.6": "sm86",
    "8.9": "sm89",
    "9.0": "sm90",
    "10.0": "sm100",
    "10.3": "sm103",
    "12.0": "sm120",
    "12.1": "sm121",
}

# (pattern on the driver's GPU name, accelerator id); first match wins, so specific names come first.
ACCELERATOR_PATTERNS: list[tuple[str, str]] = [
    (r"\bGB300\b", "nvidia-gb300"),
    (r"\bGB200\b", "nvidia-gb200"),
    (r"\bB300\b", "nvidia-b300"),
    (r"\bB200\b", "nvidia-b200"),
    (r"\bH200 NVL\b", ""),
    (r"\bH200\b", "nvidia-h200-sxm"),
    (r"\bH100 PCIe\b", "nvidia-h100-pcie"),
    (r"\bH100\b.*(SXM|HBM3)", "nvidia-h100-sxm"),
    (r"\bH20\b", "nvidia-h20"),
    (r"\bA100\b.*80GB", "nvidia-a100-80gb-sxm"),
    (r"\bA100\b.*40GB", "nvidia-a100-40gb-sxm"),
    (r"\bA10\b", "nvidia-a10"),
    (r"\bL40S\b", "nvidia-l40s"),
    (r"\bL40\b", "nvidia-l40"),
    (r"\bL4\b", "nvidia-l4"),
    (r"RTX 5090", "nvidia-rtx-5090"),
    (r"RTX 4090", "nvidia-rtx-4090"),
    (r"MI355X", "amd-mi355x"),
    (r"MI300X", "amd-mi300x"),
]


def architecture_id(cc: str | None) -> str | None:
    return ARCH_BY_CC.get(cc or "")


def accelerator_id(gpu_name: str | None) -> str | None:
    """The KB accelerator id for a driver-reported GPU name, or None when it is not in the KB."""
    if not gpu_name:
        return None
    for pattern, acc in ACCELERATOR_PATTERNS:
        if re.search(pattern, gpu_name):
            return acc or None
    return None


def gpu_slug(env: dict[str, Any]) -> str:
    """Short GPU name for file names: the accelerator id, else the driver's name in kebab case."""
    if env.get("accelerator"):
        return str(env["accelerator"])
    name = str(env.get("gpu") or "unknown-gpu").lower()
    return re.sub(r"[^a-z0-9]+", "-", name).strip("-") or "unknown-gpu"


def installed_version(name: str) -> str | None:
    """Version of a probe package if it is really installed (its marker module is importable)."""
    info = package_info(name)
    try:
        if importlib.util.find_spec(info.module) is None:
            return None
    except (ImportError, ValueError):
        return None
    try:
        return importlib.metadata.version(info.dist)
    except importlib.metadata.PackageNotFoundError:
        pass
    return _release_file(info) or "unknown"


def _release_file(info: PackageInfo) -> str | None:
    """The release named in `info.release_file`, searched in the top-level package's folders."""
    if not info.release_file:
        return None
    try:
        top = importlib.util.find_spec(info.module.split(".")[0])
    except (ImportError, ValueError):
        return None
    for folder in (top.submodule_search_locations or []) if top else []:
        path = Path(folder) / info.release_file
        if path.is_file():
            first = path.read_text(encoding="utf-8", errors="replace").strip().splitlines()[:1]
            if first and re.fullmatch(r"[0-9][0-9A-Za-z.+-]{0,40}", first[0].strip()):
                return first[0].strip()
    return None


def _driver_version() -> str | None:
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    line = out.stdout.strip().splitlines()
    return line[0].strip() if out.returncode == 0 and line else None


def collect() -> dict[str, Any]:
    """Run in the subprocess: import torch and read the device."""
    env: dict[str, Any] = {"python": platform.python_version(), "gpu": None}
    libraries = {name: v for name in PACKAGES if name != "torch" and (v := installed_version(name))}
    env["libraries"] = libraries
    try:
        import torch  # type: ignore[import-not-found,unused-ignore]
    except ImportError as exc:
        env["reason"] = f"torch is not installed ({exc})"
        return env
    env["torch"] = str(torch.__version__)
    env["cuda"] = torch.version.cuda
    if not torch.cuda.is_available():
        env["reason"] = "torch.cuda.is_available() is False (no CUDA GPU or driver)"
        return env
    props = torch.cuda.get_device_properties(0)
    cc = f"{props.major}.{props.minor}"
    env.update(
        gpu=props.name,
        compute_capability=cc,
        sm_count=props.multi_processor_count,
        memory_bytes=props.total_memory,
        driver=_driver_version(),
        device_count=torch.cuda.device_count(),
    )
    cudnn = torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None
    if cudnn:
        libraries["cudnn"] = str(cudnn)
    env["accelerator"] = accelerator_id(props.name)
    env["architecture"] = architecture_id(cc)
    return env


def fingerprint(root: Path | None = None, timeout: float = 180.0) -> dict[str, Any]:
    """Collect the fingerprint in a subprocess; without torch or a GPU, `gpu` is None and `reason` says why."""
    try:
        out = subprocess.run(
            [sys.executable, "-m", "kbtool.probe.environment"],
            capture_output=True,
            text=True,
            timeout=timeout,
            cwd=root,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return {"gpu": None, "reason": f"reading the GPU took longer than {timeout:.0f} s", "libraries": {}}
    lines = [ln for ln in out.stdout.splitlines() if ln.startswith("{")]
    if out.returncode != 0 or not lines:
        tail = (out.stderr or "").strip().splitlines()[-1:] or ["no output"]
        return {"gpu": None, "reason": f"reading the GPU failed: {tail[0]}", "libraries": {}}
    env: dict[str, Any] = json.loads(lines[-1])
    return env


if __name__ == "__main__":
    print(json.dumps(collect()))


def kb_context(records: Path, env: dict[str, Any]) -> dict[str, Any]:
    """The KB's accelerator and architecture records for this GPU, for judges that compare with them."""
    from kbtool.store.untrusted import UntrustedInputError, load_yaml

    out: dict[str, Any] = {}
    for key, folder in (("accelerator", "accelerators"), ("architecture", "architectures")):
        rid = env.get(key)
        path = records / folder / f"{rid}.yaml"
        if rid and isinstance(rid, str) and "/" not in rid and path.is_file():
            try:
                out[key] = load_yaml(path, root=records)
            except UntrustedInputError:
                continue
    return out
