"""Pieces shared by every record kind: ids, sources, basis, facts, verification, scope, conditions."""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Any, Generic, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Discriminator, Field, Tag, ValidationInfo, field_validator, model_validator

ID_PATTERN = r"^[a-z0-9][a-z0-9.+-]*(/[a-z0-9][a-z0-9.+-]*)*$"
ID_MAX_LENGTH = 160  # an id is a file name (`<id>.yaml`, `.<id>.yaml.lock`): well inside NAME_MAX (255)
Id = Annotated[str, Field(pattern=ID_PATTERN, max_length=ID_MAX_LENGTH, description="Stable lowercase kebab-case id")]
Ref = Annotated[str, Field(pattern=ID_PATTERN, max_length=ID_MAX_LENGTH, description="The id of another record")]
Version = Annotated[
    str, Field(pattern=r"^[0-9]+(\.[0-9A-Za-z]+)*([.+-][0-9A-Za-z.+-]+)?$", description="A release version")
]


class Strict(BaseModel):
    """Base for every model: unknown keys are errors."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True, use_enum_values=True, defer_build=True)


def given(*names: str) -> dict[str, Any]:
    """JSON Schema: every one of `names` is present and not null (nor an empty string)."""
    return {"required": list(names), "properties": {n: {"not": {"enum": [None, ""]}} for n in names}}


def schema_rule(rule: dict[str, Any]) -> ConfigDict:
    """A model config whose JSON Schema also states `rule`, what the model's validator checks (so the
    published schema accepts and rejects what the model does)."""
    return ConfigDict(extra="forbid", populate_by_name=True, use_enum_values=True, json_schema_extra=rule,
                      defer_build=True)


class Basis(StrEnum):
    recorded = "recorded"
    measured = "measured"
    derived = "derived"
    unverified = "unverified"


class SourceType(StrEnum):
    seed = "seed"
    source_code = "source-code"
    doc = "doc"
    issue = "issue"
    paper = "paper"
    blog = "blog"
    probe = "probe"


PRIMARY_SOURCE_TYPES = frozenset({SourceType.source_code.value, SourceType.doc.value})


class Source(Strict):
    """Where a fact comes from: a URL, a file at a commit, a seed document, or a probe."""

    model_config = schema_rule({
        "anyOf": [given("url"), given("repo"), given("seed"), given("ref")],
        "if": given("repo"), "then": {"anyOf": [given("path"), given("url")]},
    })

    type: SourceType = Field(description="What kind of source this is")
    url: str | None = Field(default=None, description="Address of a page, issue or paper")
    repo: str | None = Field(default=None, description="owner/name of a repository")
    path: str | None = Field(default=None, description="File path inside the repository")
    commit: str | None = Field(
        default=None, pattern=r"^[0-9a-f]{7,40}$", description="Commit the file was read at"
    )
    line: int | None = Field(default=None, ge=1, description="Line in the file")
    seed: str | None = Field(default=None, description="Seed file name, e.g. 001_cecac612a9e92bba.txt")
    ref: str | None = Field(default=None, description="Probe module or other internal reference")
    quote: str | None = Field(default=None, max_length=400, description="At most one sentence, verbatim")
    section: str | None = Field(default=None, description="Section or table of the source that holds the fact")

    @model_validator(mode="after")
    def _has_locator(self) -> Source:
        if not (self.url or self.repo or self.seed or self.ref):
            raise ValueError("a source needs a locator: url, repo (+ path, commit), seed or ref")
        if self.repo and not self.path and not self.url:
            raise ValueError("a repository source needs a path")
        return self

    def locator(self) -> str:
        if self.seed:
            return f"seed {self.seed}" + (f" ({self.section})" if self.section else "")
        if self.repo:
            at = f"@{self.commit[:8]}" if self.commit else ""
            line = f":{self.line}" if self.line else ""
            return f"{self.repo}{at} {self.path or ''}{line}".strip()
        return self.url or self.ref or "?"


T = TypeVar("T")


class Fact(Strict, Generic[T]):
    """One value with where it came from. `source` indexes the record's `sources` list."""

    value: T = Field(description="The value")
    basis: Basis = Field(default=Basis.recorded, description="recorded, measured, derived or unverified")
    source: int | None = Field(default=None, ge=0, description="Index into the record's sources")
    note: str | None = Field(default=None, description="Conditions or caveats on the value")


Number = float | int
NumFact = Fact[Number]
BoolFact = Fact[bool]


class Status(StrEnum):
    unverified = "unverified"
    verified = "verified"
    refuted = "refuted"
    disputed = "disputed"
    untestable = "untestable"


class Side(Strict):
    """One position in a dispute, with its sources."""

    position: str = Field(description="What this side says")
    sources: list[Source] = Field(min_length=1, description="Who says it")
    requires: Condition | None = Field(
        default=None, description="For a reject gate: what this side says must hold for the subject to run. Where "
        "every side gives one and none holds, the sides agree and the gate rejects (it is disputed elsewhere)")


class VerdictScope(Strict):
    """The environment one verdict covers: an architecture, library releases, a phase (design.md §2)."""

    sm: str | None = Field(default=None, description="Architecture id the evidence ran on, e.g. sm90")
    libraries: dict[str, str] = Field(default_factory=dict, description="Library -> version the evidence ran")
    phase: Literal["prefill", "decode"] | None = Field(default=None, description="Phase, where limited")


class ScopedVerdict(Strict):
    """One verdict on a claim inside one scope, backed by evidence (browser-compat-data style)."""

    scope: VerdictScope = Field(description="Where this verdict holds; nowhere else")
    status: Literal["verified", "refuted", "untestable"] = Field(description="What the evidence showed there")
    evidence: list[Ref] = Field(default_factory=list, description="Evidence records behind it")
    reason: str | None = Field(default=None, description="What the evidence showed, or why untestable")


class Verification(Strict):
    status: Status = Field(default=Status.unverified, description="Verification status of the claim")
    evidence: list[Ref] = Field(default_factory=list, description="Evidence records behind the status")
    reason: str | None = Field(default=None, description="Why untestable, or what the evidence showed")
    sides: list[Side] = Field(default_factory=list, description="For disputed claims: the disagreeing sides")
    checked: str | None = Field(default=None, description="Date of the last status change (YYYY-MM-DD)")
    verdicts: list[ScopedVerdict] = Field(default_factory=list, description="Verdicts per scope (#14 step 5)")


class VersionRange(Strict):
    """OSV-style affected range of one library (or CUDA, or an engine)."""

    model_config = schema_rule({"not": given("fixed", "last_affected")})

    library: str = Field(description="Package name: flashinfer, flash-attn, torch, vllm, cuda, flashmla, ...")
    introduced: Version | None = Field(default=None, description="First version the claim holds for")
    fixed: Version | None = Field(default=None, description="First version it no longer holds for")
    last_affected: Version | None = Field(default=None, description="Last version known to hold")
    evidence: list[Ref] = Field(default_factory=list,
                                description="Evidence records that set or moved a bound (scope events, kb probe apply)")
    fork_of: str | None = Field(
        default=None,
        description="This range is of a fork whose code for this claim is that library's (the claim's sources cite "
                    "the fork's lines): a run on the fork inside the range counts as a run on the library")

    @model_validator(mode="after")
    def _one_end(self) -> VersionRange:
        if self.fixed and self.last_affected:
            raise ValueError("give `fixed` or `last_affected`, not both")
        return self


# ---- condition trees -------------------------------------------------------------------------

Scalar = str | int | float | bool


_COMPARED = ("eq", "ne", "in", "not_in", "ge", "gt", "le", "lt")
_OPERAND_TYPES = {"int": ("number", "a number"), "number": ("number", "a number"), "bool": ("boolean", "true or false"),
                  "version": ("string", "a quoted version")}


def _typed_operands() -> list[dict[str, Any]]:
    """JSON Schema: a variable's operands have its type (numbers for ctx and head_dim, strings for versions)."""
    from kbtool.vocab import VARS

    rules = []
    for typ, (json_type, _) in _OPERAND_TYPES.items():
        names = sorted(k for k, (t, _) in VARS.items() if t == typ)
        one: dict[str, Any] = {"anyOf": [{"type": json_type}, {"type": "null"}]}
        many: dict[str, Any] = {"anyOf": [{"type": "array", "items": {"type": json_type}}, {"type": "null"}]}
        rules.append({"if": {"required": ["var"], "properties": {"var": {"enum": names}}},
                      "then": {"properties": {op: many if op in ("in", "not_in") else one for op in _COMPARED}}})
    return rules


class Leaf(Strict):
    """A test on one query variable. Exactly one operator is given; its operand has the variable's type."""

    model_config = schema_rule({"oneOf": [{"required": [op], "properties": {op: {"not": {"type": "null"}}}}
                                          for op in ("eq", "ne", "in", "not_in", "ge", "gt", "le", "lt",
                                                     "multiple_of")],
                                "allOf": _typed_operands()})

    var: str = Field(description="Query variable: sm, gpu, ctx, kv_dtype, dtype, head_dim, phase, ...")
    eq: Scalar | None = Field(default=None, description="equal to")
    ne: Scalar | None = Field(default=None, description="not equal to")
    in_: list[Scalar] | None = Field(default=None, alias="in", description="one of")
    not_in: list[Scalar] | None = Field(default=None, description="none of")
    ge: Scalar | None = Field(default=None, description="at least (numbers or versions)")
    gt: Scalar | None = Field(default=None, description="greater than")
    le: Scalar | None = Field(default=None, description="at most")
    lt: Scalar | None = Field(default=None, description="less than")
    multiple_of: int | None = Field(default=None, ge=1, description="a multiple of")

    @field_validator("eq", "ne", "in_", "not_in", "ge", "gt", "le", "lt")
    @classmethod
    def _typed(cls, value: Any, info: ValidationInfo) -> Any:
        """The operand has the variable's type: `le: '256'` for head_dim compared as text and rejected 64."""
        from kbtool.vocab import VARS

        typ = VARS.get(info.data.get("var") or "", ("", None))[0]
        want = _OPERAND_TYPES.get(typ)
        if want is None or value is None:
            return value
        op = "in" if info.field_name == "in_" else info.field_name
        for v in value if isinstance(value, list) else [value]:
            ok = (isinstance(v, bool) if typ == "bool" else isinstance(v, str) if typ == "version"
                  else isinstance(v, int | float) and not isinstance(v, bool))
            if not ok:
                fix = (f"write {op}: {v} without quotes (a quoted number compares as text)"
                       if isinstance(v, str) else f"quote it: {op}: '{v}'" if typ == "version"
                       else f"write {want[1]}")
                raise ValueError(f"{info.data.get('var')} is compared with {want[1]}; {v!r} is "
                                 f"{'a string' if isinstance(v, str) else type(v).__name__}: {fix}")
        return value

    @model_validator(mode="after")
    def _one_op(self) -> Leaf:
        ops = [k for k in OPERATORS if getattr(self, _field(k)) is not None]
        if len(ops) != 1:
            raise ValueError(f"a condition leaf takes exactly one operator of {list(OPERATORS)}; got {ops}")
        return self

    @property
    def op(self) -> str:
        return next(k for k in OPERATORS if getattr(self, _field(k)) is not None)

    @property
    def operand(self) -> Any:
        return getattr(self, _field(self.op))


OPERATORS = ("eq", "ne", "in", "not_in", "ge", "gt", "le", "lt", "multiple_of")


def _field(op: str) -> str:
    return "in_" if op == "in" else op


MAX_BRANCHES = 64
"""Sub-conditions of one `all` or `any` (the shipped records use at most 9): a list of values is one leaf's `in`."""


class All(Strict):
    all: list[Condition] = Field(min_length=1, max_length=MAX_BRANCHES, description="every sub-condition holds")


class AnyOf(Strict):
    any: list[Condition] = Field(min_length=1, max_length=MAX_BRANCHES,
                                 description="at least one sub-condition holds (list values in one leaf's `in`)")


class Not(Strict):
    not_: Condition = Field(alias="not", description="the sub-condition does not hold")


def _condition_kind(v: Any) -> str:
    """Which kind of condition a mapping is, by its keys: a leaf's problem is then reported alone, not beside
    "missing field 'all'" from every other branch of the union."""
    if isinstance(v, dict):
        return "All" if "all" in v else "AnyOf" if "any" in v else "Not" if "not" in v else "Leaf"
    return type(v).__name__ if isinstance(v, All | AnyOf | Not) else "Leaf"


Condition = Annotated[
    Annotated[All, Tag("All")] | Annotated[AnyOf, Tag("AnyOf")] | Annotated[Not, Tag("Not")]
    | Annotated[Leaf, Tag("Leaf")],
    Discriminator(_condition_kind)]

All.model_rebuild()
AnyOf.model_rebuild()
Not.model_rebuild()


def condition_vars(cond: Condition | None) -> set[str]:
    """Every variable a condition tree reads."""
    if cond is None:
        return set()
    if isinstance(cond, Leaf):
        return {cond.var}
    if isinstance(cond, All):
        return set().union(*(condition_vars(c) for c in cond.all))
    if isinstance(cond, AnyOf):
        return set().union(*(condition_vars(c) for c in cond.any))
    return condition_vars(cond.not_)


# ---- base record ------------------------------------------------------------------------------


class Record(Strict):
    """Fields every record has."""

    id: Id = Field(description="Stable lowercase id, unique across the KB")
    kind: str = Field(description="Record kind")
    name: str = Field(min_length=1, description="Human-readable name")
    aliases: list[str] = Field(default_factory=list, description="Other names people type")
    sources: list[Source] = Field(min_length=1, description="Where the record's facts come from")
    notes: str | None = Field(default=None, description="Free text, in our own words")

    def refs(self) -> list[tuple[str, str]]:
        """(relation, target id) pairs for the reference graph."""
        return []


KindLiteral = Literal[
    "architecture",
    "accelerator",
    "hardware-parameter",
    "kernel",
    "engine-backend",
    "claim",
    "model",
    "evidence",
    "measurement",
    "topic",
]
