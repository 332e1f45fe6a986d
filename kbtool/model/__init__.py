"""Pydantic models, one module per record kind."""

from __future__ import annotations

from .accelerator import Accelerator
from .architecture import Architecture
from .claim import Claim, Reason
from .common import Record, Source, Status, Verification
from .engine_backend import EngineBackend
from .engine_priority import EnginePriority
from .engine_release import EngineRelease
from .evidence import Evidence
from .hardware_parameter import HardwareParameter
from .kernel import Kernel
from .measurement import Measurement
from .model_card import LayerGroup, Model
from .topic import Topic

MODELS: dict[str, type[Record]] = {
    "architecture": Architecture,
    "accelerator": Accelerator,
    "hardware-parameter": HardwareParameter,
    "kernel": Kernel,
    "engine-backend": EngineBackend,
    "engine-priority": EnginePriority,
    "engine-release": EngineRelease,
    "claim": Claim,
    "model": Model,
    "evidence": Evidence,
    "measurement": Measurement,
    "topic": Topic,
}

# records/<folder>/<id>.yaml
FOLDERS: dict[str, str] = {
    "architecture": "architectures",
    "accelerator": "accelerators",
    "hardware-parameter": "hardware-parameters",
    "kernel": "kernels",
    "engine-backend": "engine-backends",
    "engine-priority": "engine-priorities",
    "engine-release": "engine-releases",
    "claim": "claims",
    "model": "models",
    "evidence": "evidence",
    "measurement": "measurements",
    "topic": "topics",
}

__all__ = [
    "FOLDERS",
    "MODELS",
    "Accelerator",
    "Architecture",
    "Claim",
    "EngineBackend",
    "EnginePriority",
    "EngineRelease",
    "Evidence",
    "HardwareParameter",
    "Kernel",
    "LayerGroup",
    "Measurement",
    "Model",
    "Reason",
    "Record",
    "Source",
    "Status",
    "Topic",
    "Verification",
]
