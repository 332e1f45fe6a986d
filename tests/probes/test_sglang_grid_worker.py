"""probes/_sglang_grid.py's two savings, without SGLang (issue 46): msgspec's struct fields built once per class
(the same answer SGLang gets) and a failed import not run again within a phase (the same exception)."""

from __future__ import annotations

import importlib
import sys
import types
from pathlib import Path

import pytest

from probes import _sglang_grid as G


def _fake_structs() -> tuple[types.SimpleNamespace, list[object]]:
    calls: list[object] = []

    class StructMeta(type):
        pass

    def fields(obj: object) -> tuple[str, ...]:
        calls.append(obj)
        cls = obj if isinstance(obj, StructMeta) else type(obj)
        return tuple(sorted(vars(cls).get("__annotations__", {})))

    return types.SimpleNamespace(StructMeta=StructMeta, fields=fields), calls


def test_struct_fields_are_built_once_per_class() -> None:
    structs, calls = _fake_structs()

    class Args(metaclass=structs.StructMeta):
        page_size: int
        attention_backend: str

    class Other(metaclass=structs.StructMeta):
        x: int

    want = structs.fields(Args)
    calls.clear()
    assert G.cache_struct_fields(structs) and G.cache_struct_fields(structs)  # installing twice wraps once
    got = [structs.fields(Args) for _ in range(5)]
    assert all(g == want for g in got) and all(g is got[0] for g in got)
    assert structs.fields(Other) == ("x",)
    assert calls == [Args, Other], "msgspec is asked once per class"
    instance = Args()
    assert structs.fields(instance) == want and structs.fields(instance) == want
    assert calls[2:] == [instance, instance], "instances are not kept"


def test_a_failed_import_is_not_run_again_until_cleared(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "kb_fails_to_load.py").write_text(
        "import kb_import_counter\nkb_import_counter.runs += 1\nraise RuntimeError('no GPU kernels here')\n")
    (tmp_path / "kb_import_counter.py").write_text("runs = 0\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    counter = importlib.import_module("kb_import_counter")
    imports = G.FailedImports()
    try:
        for _ in range(3):
            with pytest.raises(RuntimeError, match="no GPU kernels here"):
                importlib.import_module("kb_fails_to_load")
        assert counter.runs == 1 and imports.hits == 2
        with pytest.raises(ModuleNotFoundError):  # not found: looked up each time, never remembered
            importlib.import_module("kb_no_such_module")
        assert "kb_no_such_module" not in imports.failed
        imports.clear()  # a new phase (the platform patched): the module runs again
        with pytest.raises(RuntimeError):
            importlib.import_module("kb_fails_to_load")
        assert counter.runs == 2
    finally:
        imports.close()
    try:
        with pytest.raises(RuntimeError):  # Python's own import again: it runs every time
            importlib.import_module("kb_fails_to_load")
        assert counter.runs == 3
    finally:
        sys.modules.pop("kb_import_counter", None)
