"""SGLang's request-to-token table (kbtool/solve/engines/sglang/reqtable.py, issue 44): `ReqToTokenPool` allocates
`torch.zeros((max_num_reqs + 1, context_len + extra), int32)` (0.5.17 mem_cache/memory_pool.py:275-281, 0.5.23
:402-408; extra = 4 + the draft tokens, 0.5.17 mem_cache/allocation_sizing.py:46-62, 0.5.23 :96-116) after the pool
is planned and before it is built (0.5.17 mem_cache/kv_cache_configurator.py:385-412, 0.5.23 :742-777), out of the
memory the pool's budget leaves outside it (0.5.17 `_profile_available_bytes` :1614-1657, 0.5.23 :2990-3060)."""

from __future__ import annotations

import pytest
import yaml

from kbtool.query_cli import image
from kbtool.render.verdict import answer_summary
from kbtool.solve.engines.sglang import pool as sglang_pool
from kbtool.solve.engines.sglang import reqtable
from kbtool.solve.request import build_query
from kbtool.solve.solver import solve
from tests.util import DATA

GIB = 1 << 30
RELEASES = ("0.5.17", "0.5.23")  # the releases whose code the table was read in


@pytest.fixture(scope="module")
def img():  # type: ignore[no-untyped-def]
    return image()


def _line(url: str) -> str:
    rows = yaml.safe_load((DATA / "serve-lines" / "sglang.yaml").read_text(encoding="utf-8"))
    return next(r["line"] for r in rows if r["url"] == url)


def test_the_table_is_rows_of_requests_by_context_plus_headroom_int32() -> None:
    t = reqtable.table(2048, 10_485_760)
    assert (t.rows, t.columns, t.bytes) == (2049, 10_485_764, 2049 * 10_485_764 * 4)
    assert reqtable.table(8, 4096, draft_tokens=4).columns == 4096 + 4 + 4  # 4 + max_speculative_num_draft_tokens


def test_sglang_5755_is_the_table_running_out_of_memory(img) -> None:  # type: ignore[no-untyped-def]
    """sgl-project/sglang#5755: Llama-4-Scout at its default 10,485,760-token context, TP 8, on a GPU of 79.10 GiB:
    "CUDA out of memory. Tried to allocate 80.04 GiB" at launch. max_running_requests resolves to 2,048 (the pool
    holds far fewer than 512 requests of that context: clamp to 2,048, kv_cache_configurator.py:3119-3132), so the
    table is 2,049 x 10,485,764 x 4 B = 80.04 GiB, more than the GPU's free memory after the weights."""
    line = _line("https://github.com/sgl-project/sglang/issues/5755")
    for release in RELEASES:
        a = solve(img, build_query(gpu="h100", engine="sglang", sglang=release, sglang_args=line))
        assert a.verdict == "no", release
        m = a.memory
        assert m.pool.starts is False and m.pool.tokens is None
        assert m.pool.error.startswith("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 80.04 GiB "
                                       "for SGLang's request-to-token table"), m.pool.error
        assert f"{2049 * 10_485_764 * 4 / GIB:.2f}" == "80.04"
        assert "would stop at start-up: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 80.04 GiB" \
            in answer_summary(a)


def test_the_fixes_are_sglangs_flags_each_planned_again(img) -> None:  # type: ignore[no-untyped-def]
    """The sglang#5755 line's fixes: the longest --context-length at which SGLang starts (one token more does not),
    and the most --max-running-requests at the longest context its pool holds (one more does not); more GPUs do not
    help (the table is per GPU and the slack does not grow with TP)."""
    line = _line("https://github.com/sgl-project/sglang/issues/5755")
    a = solve(img, build_query(gpu="h100", engine="sglang", sglang_args=line))
    m = a.memory
    fixes = {o["change"].split()[0] if len(o["change"].split()) == 2 else "both": o for o in m.to_fit}
    assert set(fixes) == {"--context-length", "both"}, m.to_fit
    ctx = int(fixes["--context-length"]["change"].split()[1])
    model, cap = img.model("llama-4-scout-17b-16e"), img.accelerator("nvidia-h100-sxm").capacity_bytes()
    msf = m.utilization

    def at(c: int, **kw):  # type: ignore[no-untyped-def]
        return sglang_pool.fit(model, "bf16", cap, c, mem_fraction_static=msf, page_size=1, tp=8, **kw)

    assert at(ctx)[2] is None and at(ctx)[0].fits
    assert at(ctx + 1)[2] is not None and at(ctx + 1)[2].startswith(reqtable.OOM)
    both = fixes["both"]["change"].split()
    held, reqs = int(both[1]), int(both[3])
    assert held == m.max_ctx_memory
    assert at(held, max_running_requests=reqs)[2] is None
    assert at(held, max_running_requests=reqs + 1)[2].startswith(reqtable.OOM)
    assert fixes["--context-length"]["req_to_token_bytes"] == reqtable.table(2048, ctx).bytes


@pytest.mark.parametrize("ctx,error", [
    (32_768, None),                                  # 4,097 x 32,772 x 4 B: half a GB, well inside the slack
    (5_000_000, "allocating the KV cache"),          # 41 GB: free after the weights, but more than the slack
    (20_000_000, "Tried to allocate 152.66 GiB"),    # 2,049 x 20,000,004 x 4 B: more than is free after the weights
])
def test_the_table_counts_against_the_slack_not_the_pool(img, ctx: int, error: str | None) -> None:  # type: ignore[no-untyped-def]
    m = img.model("llama-3.1-8b")
    cap = 150_754_820_096
    f, pool, err = sglang_pool.fit(m, "bf16", cap, ctx, mem_fraction_static=0.83, page_size=1)
    budget = int((cap - sglang_pool.CONTEXT_BYTES) * 0.83) - f.weights_bytes
    assert f.pool_tokens == budget // (8 * 256 * 32 * 2)  # the pool is the same whatever the table
    if error is None:
        assert err is None and pool is not None and pool.table_bytes == reqtable.table(4096, ctx).bytes
        assert "req_to_token = (max_running_requests 4,096 + 1) x (context_len 32,768 + 4) x 4 B" in f.formula
        assert "req_to_token" not in str(pool.as_dict(ctx))  # only the formula names it where it fits
    else:
        assert pool is None and err is not None and err.startswith(reqtable.OOM) and error in err, err
        assert f.fits is False and f.max_sequences == 0


def test_the_room_is_the_slack_to_the_request(img) -> None:  # type: ignore[no-untyped-def]
    """At a given context the table fits exactly up to pre-load free x (1 - mem_fraction_static) (what the budget,
    `_profile_available_bytes`, leaves outside the pool): the most requests that fit start, one more does not."""
    m = img.model("llama-3.1-8b")
    cap, ctx, msf = 150_754_820_096, 4_000_000, 0.83
    f, _pool, _err = sglang_pool.fit(m, "bf16", cap, ctx, mem_fraction_static=msf, page_size=1, max_running_requests=1)
    pre = cap - sglang_pool.CONTEXT_BYTES
    room = pre - f.weights_bytes - f.pool_bytes  # free after the load, less the pool's budget
    assert abs(room - pre * (1 - msf)) < 2  # the slack, to the rounding of SGLang's GiB floats
    n = reqtable.most_requests(ctx, room)
    assert n > 1 and reqtable.table(n, ctx).bytes <= room < reqtable.table(n + 1, ctx).bytes
    ok = sglang_pool.fit(m, "bf16", cap, ctx, mem_fraction_static=msf, page_size=1, max_running_requests=n)
    over = sglang_pool.fit(m, "bf16", cap, ctx, mem_fraction_static=msf, page_size=1, max_running_requests=n + 1)
    assert ok[2] is None and over[2] is not None and "allocating the KV cache" in over[2]


def test_the_text_names_the_error_and_the_fixes_with_the_tables_size() -> None:
    """`kb query` words it: SGLang's error on the verdict line, the fixes on the `to fit:` line, each with the table
    it leaves (the numbers from the JSON answer of the same question)."""
    import json

    from tests.util import run_kb

    line = _line("https://github.com/sgl-project/sglang/issues/5755")
    got = run_kb("query", "--json", "--gpu", "h100", "--sglang-args", line)
    assert got.code == 0
    m = json.loads(got.out)["memory"]
    text = " ".join(run_kb("query", "--gpu", "h100", "--sglang-args", line).out.split())
    assert text.startswith("verdict: no — nvidia-h100-sxm x8: SGLang 0.5.23 would stop at start-up: "
                           "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 80.04 GiB for SGLang's "
                           "request-to-token table (ReqToTokenPool.req_to_token, (max_running_requests 2,048 + 1) x "
                           "(context_len 10,485,760 + 4) x 4 B), with "), text[:400]
    fixes = "; ".join(f"{o['change']} (starts: request-to-token table {o['req_to_token_bytes'] / 1e9:,.1f} GB)"
                      for o in m["to_fit"])
    assert f"to fit: {fixes} " in text, text
