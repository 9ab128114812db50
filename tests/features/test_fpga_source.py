"""HLS kernels' C sources as features: the loop each pragma placeholder annotates (trips, nesting,
accesses, reductions, carried dependences), a design's knobs turned into ``src_*`` columns, sources
carried by the loader's rows and by items, and every published kernel's placeholders found in its
source."""

import json
import math

import numpy as np
import pandas as pd
import pytest
from preflight.data.catalogue import Catalogue
from preflight.data.fpga import FpgaItem, item_cost
from preflight.data.program_graph import load_graph
from preflight.data.settings import Settings
from preflight.data.sources import hlsyn
from preflight.features import fpga
from preflight.features.fpga_source import SOURCE_COLUMNS, load_source, parse_source, source_statistics
from pydantic import ValidationError

from tests.conftest import SHARED_DATASETS
from tests.fpga import KERNELS, kernel_gexf, write_hlsyn

GEMM = """#pragma ACCEL kernel
void kernel_gemm(double alpha, double C[60][70], double A[60][80], double B[80][70])
{
  int i; int j; int k;
/* Standardize from: for(i = 0; i < 99; i++) {...} */
// #pragma ACCEL PARALLEL FACTOR=auto{__PARA__L7}
#pragma ACCEL PIPELINE auto{__PIPE__L0}
#pragma ACCEL TILE FACTOR=auto{__TILE__L0}
#pragma ACCEL PARALLEL FACTOR=auto{__PARA__L0}
  for (i = 0; i < 60; i++) {
#pragma ACCEL PARALLEL FACTOR=auto{__PARA__L1}
    for (j = 0; j <= 69; j++) {
      C[i][j] *= ((double )2);
    }
#pragma ACCEL PIPELINE auto{__PIPE__L2}
#pragma ACCEL PARALLEL FACTOR=auto{__PARA__L2}
    loop_k:
    for (k = 0; k < 80; k++) {
#pragma ACCEL PARALLEL reduction=C FACTOR=auto{__PARA__L3}
      for (j = 0; j < 70; j++) {
        C[i][j] += alpha * A[i][k] * B[k][j];
      }
    }
  }
}
"""
STENCIL = """void kernel_seidel(double A[120][120], double s[120])
{
#pragma ACCEL PARALLEL FACTOR=auto{__PARA__L0}
  for (int i = 1; i < 120 - 1; i++) {
    double acc = 0.0;
#pragma ACCEL PARALLEL FACTOR=auto{__PARA__L1}
    for (int j = 2; j < 118; j += 4)
      A[i][j] = (A[i - 1][j] + A[i][j - 2]) / 9.0;
    for (int j = i; j < 120; j++) {
      acc += A[j][i];
    }
    s[i] = acc;
  }
}
"""


def test_each_placeholder_annotates_the_next_loop_with_its_trip_count_and_nesting():
    source = parse_source(GEMM)
    assert [loop.trip for loop in source.loops] == [60, 70, 80, 70]  # the comment's loop is no loop
    assert [loop.depth for loop in source.loops] == [1, 2, 2, 3]
    outer, first, k, inner = source.loops
    assert source.loop("__PIPE__L0") is outer and source.loop("__TILE__L0") is outer
    assert source.loop("__PARA__L2") is k and source.loop("__PARA__L3") is inner  # past a label
    assert outer.inner_log2 == pytest.approx(math.log2(70 + 80 * 70))  # sibling nests add up
    assert k.outer_log2 == pytest.approx(math.log2(60)) and k.inner_log2 == pytest.approx(math.log2(70))
    assert inner.outer_log2 == pytest.approx(math.log2(60 * 80)) and inner.inner_log2 == 0
    assert source.loop("__PARA__L7") is None and source.max_depth == 3  # a pragma in a comment is none


def test_trip_counts_need_literal_bounds():
    source = parse_source(STENCIL)
    assert [loop.trip for loop in source.loops] == [118, 29, 0]  # 1..118, 2..114 by 4, from i
    assert source.loops[1].variable == "j" and source.loops[1].parent == 0
    assert parse_source("for (i = 8; --i; ) f(i);").loops[0].trip == 0


def test_accesses_reductions_and_dependences():
    outer, first, k, inner = parse_source(GEMM).loops
    assert (inner.reads, inner.writes, inner.arrays) == (3, 1, frozenset({"A", "B", "C"}))
    assert dict(inner.accesses) == {"A": 1, "B": 1, "C": 1} and inner.ops == 3  # +=, *, *
    assert k.reduction and not outer.reduction and not first.reduction  # C[i][j] += ... over k
    assert inner.reduction  # the pragma says so
    rows, columns, transpose = parse_source(STENCIL).loops
    assert columns.distance == 2 and rows.distance == 1  # A[i][j - 2], A[i - 1][j]
    assert transpose.reduction and not rows.reduction  # acc += ...; reset in each row
    assert parse_source(GEMM).array_elements == 60 * 70 + 60 * 80 + 80 * 70


def test_design_statistics_follow_unrolling_and_pipelining():
    source = parse_source(GEMM)
    plain = source_statistics({}, source)
    assert set(plain) == set(SOURCE_COLUMNS) and plain["src_loops"] == 4 and plain["src_max_depth"] == 3
    assert plain["src_copies_log2"] == 0 and plain["src_work_log2"] == pytest.approx(
        math.log2(60 * (70 + 80 * 70))
    )
    unrolled = source_statistics({"__PARA__L2": 4, "__PARA__L3": 1000}, source)
    assert unrolled["src_unrolled_work_log2"] == pytest.approx(math.log2(5670 + 1 + 4 * 70 + 70))
    assert unrolled["src_copies_log2"] == pytest.approx(math.log2(4 * 70))  # a factor stops at the trips
    assert unrolled["src_reduction_unroll_log2"] == pytest.approx(math.log2(70))
    flat = source_statistics({"__PIPE__L2": "flatten"}, source)
    assert flat["src_flattened_inner_log2"] == pytest.approx(math.log2(70))
    assert flat["src_copies_log2"] == pytest.approx(math.log2(70))  # the loop inside is unrolled
    assert source_statistics({"__PIPE__L0": ""}, source)["src_coarse_pipelines"] == 1
    assert flat["src_latency_log2"] < plain["src_latency_log2"] < math.inf
    assert flat["src_hardware_log2"] > plain["src_hardware_log2"]
    assert source_statistics({"__TILE__L0": 6}, source)["src_tile_share_max"] == pytest.approx(0.1)


def test_a_dependence_caps_what_unrolling_gains():
    source = parse_source(STENCIL)
    unrolled = source_statistics({"__PARA__L1": 8}, source)
    assert unrolled["src_dependence_unroll_log2"] == 3
    assert unrolled["src_latency_log2"] == pytest.approx(
        source_statistics({"__PARA__L1": 2}, source)["src_latency_log2"]
    )


#: Sources a hostile client may send (the item takes up to 100,000 characters): each once took from
#: 15 s to minutes to parse, holding the interpreter, as a pattern backtracked over every split of
#: a run of spaces (a declaration without its name) or every start of a comment never closed.
HOSTILE_SOURCES = {
    "comments never closed": "void k(){\n" + "/*a" * 33_000,
    "a type and no name": "void k(){\nint" + " " * 99_000 + "(",
    "a cast and no name": "void k(){\n(int" + " " * 99_000 + "x",
    "a loop head of one long name": "void k(){\nfor (" + "a" * 99_900 + "; i < 1; i++) {}\n}",
    "type words and no name": "void k(){\n" + "int " * 24_990 + ";\n}",
}
#: 64 nested loops, 3,060 scalars made from the loop's variable and subscripts of 60 terms: the
#: dependence search once tried every scalar at every character of every subscript (> 30 s).
_TERMS = "+".join(["i"] * 60)
HOSTILE_SOURCES["many scalars and long subscripts"] = (
    "void k(){\n"
    + "for(i=0;i<2;i++){" * 64
    + "".join(f"v{j}=i;" for j in range(3_060))
    + f"A[{_TERMS}]=A[{_TERMS}];" * 306
    + "}" * 64
)[:99_990]


@pytest.mark.parametrize("text", HOSTILE_SOURCES.values(), ids=HOSTILE_SOURCES)
def test_a_hostile_source_parses_in_linear_time(text):
    assert len(parse_source(text).loops) <= 64


def test_a_graph_constant_after_a_run_of_digits_is_read_in_linear_time():
    assert fpga.stated_size("i32", "1" * 100_000 + "x", 2) == 0
    assert fpga.stated_size("i32", "i32 64", 2) == pytest.approx(math.log2(65))


def test_a_comment_never_closed_runs_to_the_end():
    source = parse_source("void k(int a[8]) {\n/* not closed\nfor (int i = 0; i < 8; i++) { a[i] = 0; }\n}")
    assert source.loops == ()


def test_without_a_source_every_column_is_nan():
    assert all(math.isnan(v) for v in source_statistics({"__PARA__L0": 4}, None).values())
    assert load_source("") is None


def _source_for(trips: tuple[int, ...]) -> str:
    """A loop nest with the knobs ``tests/fpga.kernel_gexf`` puts on its graph."""
    lines = ["void k(double A[64][64], double x[64]) {"]
    for loop, trip in enumerate(trips):
        lines += [
            f"#pragma ACCEL PARALLEL FACTOR=auto{{__PARA__L{loop}}}",
            f"#pragma ACCEL PIPELINE auto{{__PIPE__L{loop}}}",
        ]
        lines += ["#pragma ACCEL TILE FACTOR=auto{__TILE__L0}"] if loop == 0 else []
        lines.append(f"for (int i{loop} = 0; i{loop} < {trip}; i{loop}++) {{")
    lines += ["x[i0] += A[i0][i1] * x[i1];", "}" * len(trips), "}"]
    return "\n".join(lines)


def _rows(code: str | None, *pragmas: dict) -> pd.DataFrame:
    gexf = kernel_gexf(*KERNELS["k-gemm"])
    rows = pd.DataFrame(
        {"kernel": "k-gemm", "graph": gexf, "tool": "v20", "pragmas": [json.dumps(p) for p in pragmas]}
    )
    return rows if code is None else rows.assign(code=code)


def test_design_features_read_the_code_as_text_or_path_and_go_nan_without(tmp_path):
    code = _source_for(KERNELS["k-gemm"][0])
    path = tmp_path / "k-gemm_kernel.c"
    path.write_text(code)
    pragmas = ({"__PARA__L2": 4, "__PIPE__L0": "flatten"}, {})
    text = fpga.design(_rows(code, *pragmas), Catalogue.load()).X
    from_path = fpga.design(_rows(str(path), *pragmas), Catalogue.load()).X
    pd.testing.assert_frame_equal(text, from_path)
    assert (
        text.loc[0, "src_copies_log2"] == pytest.approx(math.log2(64 * 32))
        and text.loc[1, "src_copies_log2"] == 0
    )
    absent = fpga.design(_rows(None, *pragmas), Catalogue.load()).X
    assert absent[list(SOURCE_COLUMNS)].isna().all().all() and len(absent.columns) == len(text.columns)
    mixed = fpga.design(pd.concat([_rows(code, {}), _rows("", {})], ignore_index=True), Catalogue.load()).X
    assert np.isnan(mixed.loc[1, "src_loops"]) and mixed.loc[0, "src_loops"] == 3


@pytest.mark.parametrize(
    ("code", "message"),
    [
        ("/etc/passwd", "code: the kernel's C source text"),
        ("../shared/datasets/fpga/hlsyn_raw/sources/gemm-p_kernel.c", "not a file's path"),
        (
            "#pragma ACCEL PARALLEL FACTOR=auto{__PARA__L9}\nfor (i = 0; i < 4; i++) ;",
            "code: placeholders the graph lacks: __PARA__L9",
        ),
        ("for(;;);\n" * 65, "code: 65 loops; at most 64"),
    ],
)
def test_an_items_code_is_c_text_for_its_graph(code, message):
    with pytest.raises(ValidationError, match=message):
        FpgaItem(kernel="mine", graph=kernel_gexf(*KERNELS["k-gemm"]), code=code)


def test_an_items_code_costs_like_gexf_text():
    code = _source_for((64, 64, 32))
    assert item_cost({"kernel": "k", "code": code}) == pytest.approx(
        item_cost({"kernel": "k"}) + len(code) / 100
    )


def test_a_known_kernel_brings_its_code_and_the_loader_its_path(tmp_path):
    path = write_hlsyn(tmp_path, designs_per_kernel=2, kernels=("k-gemm", "k-mvt"))
    sources = path.parent / hlsyn.SOURCES
    sources.mkdir(parents=True)
    (sources / "k-gemm_kernel.c").write_text(_source_for(KERNELS["k-gemm"][0]))
    (sources / "k-mvt_small_kernel.c").write_text(_source_for(KERNELS["k-mvt"][0]))  # a variant's
    rows = hlsyn.load(path).rows
    assert set(rows["code"]) == {str(sources / "k-gemm_kernel.c"), str(sources / "k-mvt_small_kernel.c")}
    assert hlsyn.kernel_source(path.parent, "k-atax") == ""
    context = Settings(home=tmp_path / "home", datasets=tmp_path).validation_context()
    item = FpgaItem.model_validate({"kernel": "k-gemm"}, context=context)
    assert item.code == str(sources / "k-gemm_kernel.c")
    other = FpgaItem.model_validate({"kernel": "k-gemm", "graph": kernel_gexf((8,), 1)}, context=context)
    assert other.code == ""  # a graph of another kernel: its source is not the known one
    assert FpgaItem.model_validate({"kernel": "k-atax"}, context=context).code == ""


@pytest.mark.integration
def test_every_published_placeholder_has_its_loop_in_the_kernels_source():
    folder = SHARED_DATASETS / "fpga"
    if not (folder / hlsyn.SOURCES).is_dir():
        pytest.skip(f"fpga/{hlsyn.SOURCES} not found under {SHARED_DATASETS} (set PREFLIGHT_DATASETS)")
    assert len(list((folder / hlsyn.SOURCES).glob("*_kernel.c"))) == 35
    lacking, unknown_trips = {}, set()
    for kernel in pd.read_csv(folder / "hlsyn_designs.csv", usecols=["kernel"])["kernel"].unique():
        graph, code = hlsyn.kernel_graph(folder, kernel), hlsyn.kernel_source(folder, kernel)
        assert graph and code, kernel
        placeholders, source = set(load_graph(graph).placeholders), load_source(code)
        assert source is not None
        if missing := sorted(placeholders - set(source.knobs)):
            lacking[kernel] = missing
        unknown_trips |= {(kernel, n) for n in placeholders if (loop := source.loop(n)) and loop.trip == 0}
        statistics = source_statistics(dict.fromkeys(placeholders, 2), source)
        assert all(math.isfinite(v) for v in statistics.values()), kernel
    assert lacking == {}
    # aes's ``for (i = 8; --i; )`` and covariance's ``for (j = i; j < 80; j++)``: not literal
    assert unknown_trips == {("aes", "__PIPE__L1"), ("covariance", "__PIPE__L5")}
