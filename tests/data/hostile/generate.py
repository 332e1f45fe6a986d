"""Write the hostile-input corpus (run from anywhere: `python tests/data/hostile/generate.py`).

Every file gets a first line `# expect: N` with the exit code kb validate must give (1: findings).
Huge (50 MB) files and symlinks are made at test time, not committed.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import yaml

HERE = Path(__file__).resolve().parent
FILES = HERE / "files"

SRC = [{"type": "seed", "seed": "000_b54199f3c91f5781.txt"}]
BASES: dict[str, dict[str, Any]] = {
    "accelerator": {"id": "h-acc", "kind": "accelerator", "name": "A", "vendor": "nvidia", "architecture": "sm90",
                    "sm_count": {"value": 132, "source": 0}, "memory_gb": {"value": 80, "source": 0},
                    "sources": SRC},
    "claim": {"id": "h-claim", "kind": "claim", "name": "C", "subject": "sm90", "statement": "s", "effect": "reject",
              "requires": {"all": [{"var": "head_dim", "le": 256}, {"var": "sm", "in": ["sm90"]}]},
              "reason": {"code": "HEAD_DIM", "message": "m {head_dim}"}, "scope": [{"library": "flashinfer",
                                                                                    "introduced": "0.2.0"}],
              "sources": SRC},
    "model": {"id": "h-model", "kind": "model", "name": "M", "family": "f", "parameters": 1000, "weight_dtype": "bf16",
              "num_heads": 8, "head_dim": 128, "layers": [{"type": "full", "count": 2, "kv_heads": 8, "head_dim": 128}],
              "sources": SRC},
    "kernel": {"id": "h-kernel", "kind": "kernel", "name": "K", "library": "x", "phases": ["decode"], "sources": SRC},
    "architecture": {"id": "h-arch", "kind": "architecture", "name": "A", "family": "f",
                     "wgmma": {"value": True, "source": 0}, "sources": SRC},
    "engine-backend": {"id": "h-eb", "kind": "engine-backend", "name": "E", "engine": "vllm", "backend_name": "X",
                       "kernels": ["h-missing-kernel-is-dangling"], "sources": SRC},
}
RETYPES: list[Any] = [None, -1, "text", [1, 2], {"a": 1}]


def dump(data: Any) -> str:
    return yaml.safe_dump(data, sort_keys=False, allow_unicode=True)


def mutations() -> dict[str, str]:
    from kbtool.model import MODELS

    out: dict[str, str] = {}
    for kind, base in BASES.items():
        required = set(MODELS[kind].model_json_schema(by_alias=True).get("required", []))
        for key in base:
            d = copy.deepcopy(base)
            d.pop(key)
            if key in required:
                out[f"{kind}-drop-{key}"] = dump(d)
            for i, val in enumerate(RETYPES):
                if base[key] == val or (isinstance(base[key], str) and isinstance(val, str)):
                    continue
                if val is None and key not in required:
                    continue  # an optional field may be null
                d = copy.deepcopy(base)
                d[key] = val
                out[f"{kind}-retype-{key}-{i}"] = dump(d)
        d = copy.deepcopy(base)
        d["unexpected_field"] = 1
        out[f"{kind}-unknown-key"] = dump(d)
        d = copy.deepcopy(base)
        d[base and "id"] = "UPPER_case id"
        out[f"{kind}-bad-id"] = dump(d)
    return out


HAND: dict[str, bytes] = {
    "malformed-bracket": b"id: [oops\n",
    "malformed-indent": b"id: x\n  kind: claim\n bad: 1\n",
    "malformed-quote": b"id: 'unterminated\n",
    "tabs": b"id: x\nkind: claim\nsources:\n\t- a\n",
    "duplicate-keys": b"id: x\nkind: claim\nid: y\n",
    "duplicate-nested-keys": b"id: x\nkind: claim\nreason: {code: A, code: B}\n",
    "python-object": b"id: !!python/object:os.system x\n",
    "python-apply": b"id: !!python/object/apply:subprocess.call [[ls]]\n",
    "python-name": b"id: !!python/name:os.system\n",
    "custom-tag": b"id: !secret x\n",
    "binary-tag": b"id: !!binary aGVsbG8=\n",
    "set-tag": b"id: !!set {a, b}\n",
    "merge-key": b"base: &b {kind: claim}\nrec:\n  <<: *b\n",
    "empty": b"",
    "whitespace-only": b"   \n\n  \n",
    "null-document": b"null\n",
    "scalar-document": b"just a string\n",
    "list-document": b"- a\n- b\n",
    "multi-document": b"id: a\n---\nid: b\n",
    "binary-bytes": bytes(range(256)),
    "nul-in-text": b"id: x\x00y\n",
    "latin1": "id: caf\u00e9\n".encode("latin-1"),
    "utf16": "id: x\n".encode("utf-16"),
    "bom-then-garbage": b"\xef\xbb\xbf\xff\xfe",
    "huge-int": b"id: x\nkind: accelerator\nname: n\nvendor: nvidia\narchitecture: sm90\nsm_count: {value: "
    + b"9" * 500 + b"}\nsources: [{type: seed, seed: s}]\n",
    "nan-value": b"id: x\nkind: accelerator\nname: n\nvendor: nvidia\narchitecture: sm90\nl2_mb: {value: .nan}\n"
    b"sources: [{type: seed, seed: s}]\n",
    "inf-value": b"id: x\nkind: accelerator\nname: n\nvendor: nvidia\narchitecture: sm90\nl2_mb: {value: .inf}\n"
    b"sources: [{type: seed, seed: s}]\n",
    "negative-size": b"id: x\nkind: accelerator\nname: n\nvendor: nvidia\narchitecture: sm90\nmemory_gb: {value: -80}\n"
    b"sources: [{type: seed, seed: s}]\n",
    "zero-size": b"id: x\nkind: accelerator\nname: n\nvendor: nvidia\narchitecture: sm90\nmemory_gb: {value: 0}\n"
    b"sources: [{type: seed, seed: s}]\n",
    "deep-nesting-lists": b"id: " + b"[" * 500 + b"]" * 500 + b"\n",
    "deep-nesting-maps": b"id: " + b"{a: " * 300 + b"1" + b"}" * 300 + b"\n",
    "deep-condition": b"id: x\nkind: claim\nrequires: " + b"{not: " * 120 + b"{var: ctx, ge: 1}" + b"}" * 120 + b"\n",
    "long-line": b"id: x\nname: '" + b"a" * 200_000 + b"'\n",
    "many-keys": b"".join(b"k%d: %d\n" % (i, i) for i in range(30_000)),
    "dangling-subject": b"id: x-dangling\nkind: claim\nname: n\nsubject: no-such-kernel\nstatement: s\n"
    b"effect: caveat\nreason: {code: A, message: m}\nsources: [{type: seed, seed: s}]\n",
    "self-extends": b"id: x-self\nkind: architecture\nname: n\nfamily: f\nextends: x-self\n"
    b"sources: [{type: seed, seed: s}]\n",
    "same-id-as-shipped": b"id: sm90\nkind: architecture\nname: n\nfamily: f\nsources: [{type: seed, seed: s}]\n",
    "verified-no-evidence": b"id: x-ver\nkind: claim\nname: n\nsubject: sm90\nstatement: s\neffect: caveat\n"
    b"reason: {code: A, message: m}\nsources: [{type: seed, seed: s}]\nverification: {status: verified}\n",
    "bad-var": b"id: x-var\nkind: claim\nname: n\nsubject: sm90\nstatement: s\neffect: reject\n"
    b"requires: {var: rm_rf, eq: 1}\nreason: {code: A, message: m}\nsources: [{type: seed, seed: s}]\n",
    "controls-in-string": b"id: x\nname: \"\\e[31mred\\e[0m\"\n",
}


def alias_bomb(levels: int, width: int) -> bytes:
    lines = ['a0: &a0 ["lol"]']
    for i in range(1, levels):
        lines.append(f"a{i}: &a{i} [" + ",".join([f"*a{i - 1}"] * width) + "]")
    return ("\n".join(lines) + "\n").encode()


def main() -> None:
    FILES.mkdir(exist_ok=True)
    for old in FILES.glob("*.yaml"):
        old.unlink()
    corpus: dict[str, bytes] = {k: v.encode() for k, v in mutations().items()}
    corpus.update(HAND)
    for levels, width in ((6, 10), (9, 9), (12, 5), (20, 2)):
        corpus[f"alias-bomb-{levels}x{width}"] = alias_bomb(levels, width)
    for name, body in sorted(corpus.items()):
        (FILES / f"{name}.yaml").write_bytes(body)
    print(f"wrote {len(corpus)} files to {FILES}")


if __name__ == "__main__":
    main()
