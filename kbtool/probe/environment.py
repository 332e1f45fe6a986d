"""The environment fingerprint: GPU, compute capability, SMs, memory, driver, CUDA, torch, library versions.

`fingerprint()` collects it in a subprocess (so the parent never initialises CUDA), `python -m
kbtool.probe.environment` prints it as JSON. The parent then names the GPU from the records: the mappings from
GPU names and compute capabilities to the KB's accelerator and architecture ids are pure functions of the
accelerator and architecture records (their `device_names`, names, aliases and `compute_capability`).
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

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable

    from kbtool.model import Accelerator, Architecture


def architecture_id(cc: str | None, architectures: Iterable[Architecture]) -> str | None:
    """The KB architecture id of a compute capability ("9.0"), from the architecture records' `compute_capability`."""
    from kbtool.names import architecture_of

    return architecture_of(cc, {a.id: a.compute_capability for a in architectures})


def accelerator_id(gpu_name: str | None, accelerators: Iterable[Accelerator]) -> str | None:
    """The KB accelerator id for a driver-reported GPU name, or None when no record names it (or several might):
    the records' `device_names` first, then their names and aliases as whole words (kbtool/names.py)."""
    from kbtool.names import match_device

    return match_device(gpu_name, [(a.id, [a.id, a.name, *a.aliases], [d.value for d in a.device_names])
                                   for a in accelerators])


def identify(env: dict[str, Any], records: Path | None = None) -> dict[str, Any]:
    """Set `accelerator` and `architecture` of a fingerprint with a GPU from the KB's accelerator and architecture
    records (`records`, else the records tree in use: kbtool.paths)."""
    if not env.get("gpu"):
        return env
    from kbtool.kb import KB
    from kbtool.model import Accelerator, Architecture
    from kbtool.paths import records_dir
    from kbtool.store.records import load_tree

    root = records_dir(records)
    folders = [root / f for f in ("accelerators", "architectures") if (root / f).is_dir()]
    kb = KB.from_load(load_tree(root, folders)) if folders else KB()
    env["accelerator"] = accelerator_id(env.get("gpu"), kb.of_kind("accelerator", Accelerator))
    env["architecture"] = architecture_id(env.get("compute_capability"), kb.of_kind("architecture", Architecture))
    return env


def gpu_slug(env: dict[str, Any]) -> str:
    """Short GPU name for file names: the accelerator id, else the driver's name in kebab case."""
    if env.get("accelerator"):
        return str(env["accelerator"])
    name = str(env.get("gpu") or "unknown-gpu").lower()
    return re.sub(r"[^a-z0-9]+", "-", name).strip("-") or "unknown-gpu"  # ASCII only: it goes into file names


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
    return env  # accelerator and architecture: identify(), in the parent, from the records


def fingerprint(root: Path | None = None, timeout: float = 180.0, records: Path | None = None) -> dict[str, Any]:
    """Collect the fingerprint in a subprocess; without torch or a GPU, `gpu` is None and `reason` says why. The GPU
    is named by the KB's records under `records` (identify)."""
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
    return identify(env, records)


if __name__ == "__main__":
    print(json.dumps(collect()))


def kb_context(records: Path, env: dict[str, Any]) -> dict[str, Any]:
    """The KB's accelerator and architecture records for this GPU, for judges that compare with them."""
    from kbtool.store.reader import load_yaml
    from kbtool.store.untrusted import UntrustedInputError

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
