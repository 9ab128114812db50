"""HLSyn designs and the program graphs beside them: pragma values, targets of valid designs only,
placeholders found in the graph, malformed files refused with the file named."""

import json

import pytest
from preflight.data.errors import DataError
from preflight.data.program_graph import read_gexf
from preflight.data.sources import hlsyn

from tests.conftest import shared_file, write

GEXF = """<?xml version='1.0' encoding='utf-8'?>
<gexf version="1.2" xmlns="http://www.gexf.net/1.2draft">
  <graph defaultedgetype="directed" mode="static">
    <attributes class="edge" mode="static"><attribute id="5" title="flow" type="long" /></attributes>
    <attributes class="node" mode="static">
      <attribute id="2" title="text" type="string" /><attribute id="3" title="type" type="long" />
      <attribute id="4" title="full_text" type="string" />
    </attributes>
    <nodes>
      <node id="0"><attvalues><attvalue for="2" value="load" /><attvalue for="3" value="0" />
        </attvalues></node>
      <node id="1"><attvalues><attvalue for="2" value="fmul" /><attvalue for="3" value="0" />
        </attvalues></node>
      <node id="2"><attvalues><attvalue for="2" value="PARALLEL" /><attvalue for="3" value="3" />
        <attvalue for="4" value="#pragma ACCEL PARALLEL FACTOR=auto{__PARA__L0}" /></attvalues></node>
    </nodes>
    <edges>
      <edge id="0" source="0" target="1"><attvalues><attvalue for="5" value="1" /></attvalues></edge>
      <edge id="1" source="2" target="1"><attvalues><attvalue for="5" value="3" /></attvalues></edge>
    </edges>
  </graph>
</gexf>
"""
HEADER = "tool_version,kernel,design_key,valid,perf_cycles,util_BRAM,util_DSP,util_LUT,util_FF,pragmas"


def _designs(folder, rows: list[str]):
    (folder / "hlsyn_raw" / "graphs").mkdir(parents=True)
    (folder / "hlsyn_raw" / "graphs" / "gemm_processed_result.gexf").write_text(GEXF)
    return write(folder, "hlsyn_designs.csv", [HEADER, *rows])


def _pragmas(**values) -> str:
    return '"' + json.dumps(values).replace('"', '""') + '"'


def test_valid_designs_carry_targets_and_invalid_ones_only_their_validity(tmp_path):
    path = _designs(
        tmp_path,
        [
            f"v18,gemm,a,True,1200.0,0.1,0.2,0.3,0.05,{_pragmas(__PARA__L0=4, __PIPE__L0='cg')}",
            f"v20,gemm,b,False,0.0,0.0,0.0,0.0,0.0,{_pragmas(__PARA__L0=64)}",
            f"v20,atax,c,True,0.0,0.1,0.1,0.1,0.1,{_pragmas(__PARA__L0=1)}",
            "v18,gemm,d,True,10.0,0.1,0.1,0.1,0.1,not json",
            f"v21,gemm,e,True,10.0,0.1,0.1,0.1,0.1,{_pragmas()}",
            f"v18,gemm,f,True,10.0,1.7,0.1,0.1,0.1,{_pragmas()}",
            *[f"v20,gemm,g{i},True,{100 + i},0.1,0.1,0.1,0.1,{_pragmas(__PARA__L0=i)}" for i in range(3)],
        ],
    )
    loaded = hlsyn.load(path)
    assert loaded.reject_counts() == {
        "valid design without a cycle count": 1,
        "pragmas is not a JSON object of knob values": 1,
        "tool_version is not one of v18, v20": 1,
        "a resource fraction outside [0, 1]": 1,
    }
    good, bad = loaded.rows.iloc[0], loaded.rows.iloc[1]
    assert (good["cycles"], good["lut"], good["dsp"], good["valid"]) == (1200.0, 0.3, 0.2, 1.0)
    assert json.loads(good["pragmas"]) == {"__PARA__L0": 4, "__PIPE__L0": "cg"}
    assert bad["valid"] == 0.0 and bad[["cycles", "lut", "ff", "dsp", "bram"]].isna().all()
    assert good["graph"].endswith("gemm_processed_result.gexf")


def test_a_program_graph_names_its_pragma_placeholders(tmp_path):
    _designs(tmp_path, [])
    graph = read_gexf(tmp_path / "hlsyn_raw" / "graphs" / "gemm_processed_result.gexf")
    assert list(graph.nodes["text"]) == ["load", "fmul", "PARALLEL"]
    assert graph.placeholders == {"__PARA__L0": 2}
    assert graph.edges.tolist() == [[0, 2], [1, 1]] and graph.flow.tolist() == [1, 3]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("<gexf><graph", "not a readable GEXF"),
        ("<gexf><graph><nodes /></graph></gexf>", "no nodes"),
        (GEXF.replace('source="0" target="1"', 'source="0" target="9"'), "lacks"),
    ],
)
def test_malformed_graphs_are_refused_naming_the_file(tmp_path, text, message):
    path = tmp_path / "broken.gexf"
    path.write_text(text)
    with pytest.raises(DataError, match=message) as error:
        read_gexf(path)
    assert "broken.gexf" in str(error.value) or message == "lacks"


def test_the_published_designs_load_with_their_graphs():
    loaded = hlsyn.load(shared_file(hlsyn.FILE))
    rows = loaded.rows
    assert len(rows) + len(loaded.rejects) == 31597 and len(loaded.rejects) < 100
    assert rows["kernel"].nunique() == 35 and set(rows["tool"]) == {"v18", "v20"}
    assert rows.loc[rows["valid"] == 1, "cycles"].gt(0).all() and rows["valid"].between(0.3, 0.4).mean() == 0
    with_graph = rows.loc[rows["graph"] != "", "kernel"].unique()
    assert len(with_graph) >= 34
    graph = read_gexf(rows.loc[rows["graph"] != "", "graph"].iloc[0])
    assert graph.placeholders and graph.edges.shape[1] > 0
