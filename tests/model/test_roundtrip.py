"""load -> dump -> load is the identity, for generated records of several kinds."""

from __future__ import annotations

from typing import Any

import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from kbtool.store.reader import parse_bytes
from kbtool.store.schema import validate_document

ids = st.from_regex(r"[a-z][a-z0-9-]{0,20}", fullmatch=True)
text = st.text(st.characters(min_codepoint=32, max_codepoint=0x2FF, exclude_characters="\x7f"), min_size=1, max_size=30)
source = st.fixed_dictionaries({"type": st.just("seed"), "seed": text})
vars_ = st.sampled_from(["head_dim", "ctx", "batch", "block_size"])


def leaf() -> st.SearchStrategy[dict[str, Any]]:
    return st.one_of(
        st.builds(lambda v, n: {"var": v, "le": n}, vars_, st.integers(1, 10**6)),
        st.builds(lambda v, n: {"var": v, "in": n}, vars_, st.lists(st.integers(1, 4096), min_size=1, max_size=4)),
        st.builds(lambda n: {"var": "sm", "in": n}, st.lists(st.sampled_from(["sm80", "sm90", "sm100"]), min_size=1)),
        st.builds(lambda n: {"var": "head_dim", "multiple_of": n}, st.integers(1, 64)),
    )


conditions = st.recursive(
    leaf(),
    lambda inner: st.one_of(
        st.builds(lambda xs: {"all": xs}, st.lists(inner, min_size=1, max_size=3)),
        st.builds(lambda xs: {"any": xs}, st.lists(inner, min_size=1, max_size=3)),
        st.builds(lambda x: {"not": x}, inner),
    ),
    max_leaves=6,
)

claims = st.fixed_dictionaries(
    {
        "id": ids, "kind": st.just("claim"), "name": text, "subject": ids, "statement": text,
        "effect": st.sampled_from(["reject", "caveat", "supports"]),
        "reason": st.fixed_dictionaries({"code": st.from_regex(r"[A-Z][A-Z_]{0,10}", fullmatch=True),
                                         "message": text}),
        "sources": st.lists(source, min_size=1, max_size=3),
    },
    optional={"requires": conditions, "when": conditions, "aliases": st.lists(text, max_size=2),
              "scope": st.lists(st.fixed_dictionaries({"library": ids, "introduced": st.just("1.2.3")}), max_size=2)},
)

accelerators = st.fixed_dictionaries(
    {
        "id": ids, "kind": st.just("accelerator"), "name": text, "vendor": st.sampled_from(["nvidia", "amd"]),
        "architecture": ids, "sources": st.lists(source, min_size=1, max_size=2),
    },
    optional={
        "sm_count": st.fixed_dictionaries({"value": st.integers(1, 500), "source": st.just(0)}),
        "memory_gb": st.fixed_dictionaries({"value": st.floats(1, 500, allow_nan=False),
                                            "basis": st.sampled_from(["recorded", "unverified"])}),
    },
)


def _load(data: dict[str, Any]) -> Any:
    raw = yaml.safe_dump(data, allow_unicode=True, sort_keys=False).encode()
    doc, problems = parse_bytes(raw, "gen.yaml")
    assert not problems, problems
    record, findings = validate_document(doc)
    assert not findings, [f.text() for f in findings]
    return record


@settings(max_examples=150, deadline=None)
@given(st.one_of(claims, accelerators))
def test_load_dump_load_is_identity(data: dict[str, Any]) -> None:
    first = _load(data)
    again = _load(first.model_dump(mode="json", by_alias=True, exclude_defaults=True))
    assert again == first
