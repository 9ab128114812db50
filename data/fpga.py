"""HLS designs for FPGAs: the pragma knobs a design sets on its kernel's program graph, and the item
the API takes.

A design is a kernel (its program graph, ``program_graph.py``) plus a value for each pragma
placeholder of the graph: ``__PARA__L<i>`` a loop's parallel (unroll) factor, ``__PIPE__L<i>`` its
pipeline mode and ``__TILE__L<i>`` its tile factor (Merlin's pragmas, as HLSyn sets them). A
placeholder a design leaves out takes the value that leaves the loop as written (factor 1, ``off``).
A design may also carry its kernel's C source with the same placeholders (``code``; not ``source``,
which names a table's dataset), from which the tree reads what each knob's loop does
(``features/fpga_source.py``).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Collection, Mapping
from functools import lru_cache
from pathlib import Path
from typing import Literal

from preflight.data.errors import DataError
from preflight.data.names import DeviceName
from preflight.data.program_graph import PLACEHOLDER, load_graph
from preflight.data.settings import Settings
from pydantic import BaseModel, ConfigDict, Field, StrictInt, ValidationInfo, model_validator

#: The kinds of knob, by the tag of their placeholder, with what each does.
KNOBS: dict[str, str] = {
    "PARA": "parallel factor: the loop unrolled this many ways (an integer from 1)",
    "PIPE": "pipeline mode: off, '' (pipelined), cg (coarse-grained), fg (fine-grained), flatten",
    "TILE": "tile factor: the loop strip-mined into tiles of this many iterations (an integer from 1)",
}
PIPELINE_MODES: tuple[str, ...] = ("off", "", "cg", "fg", "flatten")
#: What a knob the design does not set is taken to be.
DEFAULTS: dict[str, int | str] = {"PARA": 1, "PIPE": "off", "TILE": 1}
#: Largest parallel or tile factor accepted (HLSyn's largest is 400, a whole loop).
MAX_FACTOR = 1 << 16
TOOLS: tuple[str, ...] = ("v18", "v20")
#: The board HLSyn's designs were synthesized for, and a design's board unless it names another.
BOARD = "xilinx-alveo-u200"
Tool = Literal["v18", "v20"]
#: The largest C source accepted inline (HLSyn's largest, aes, has about 15,000 characters), and the
#: most ``for`` loops one may have (HLSyn's most: 8).
MAX_SOURCE_CHARS, MAX_SOURCE_LOOPS = 100_000, 64
#: A ``for`` loop's head in C.
FOR_LOOP = re.compile(r"\bfor\s*\(")


def knob_kind(placeholder: str) -> str:
    """``PARA``, ``PIPE`` or ``TILE`` for a placeholder name such as ``__PARA__L0``."""
    kind = placeholder[2:6]
    if not (placeholder.startswith("__") and placeholder[6:9] == "__L" and kind in KNOBS):
        raise ValueError(f"{placeholder!r} is not a pragma placeholder (__PARA__L0, __PIPE__L1, ...)")
    return kind


def knob_value(placeholder: str, value: object) -> int | str:
    """A knob's value, checked for its kind; the error names the knob and what it takes."""
    kind = knob_kind(placeholder)
    if kind == "PIPE":
        if value not in PIPELINE_MODES:
            modes = ", ".join(repr(m) for m in PIPELINE_MODES)
            raise ValueError(f"pragmas.{placeholder}: a pipeline mode is one of {modes}, not {value!r}")
        return str(value)
    if isinstance(value, bool) or not isinstance(value, int | str) or not str(value).isdigit():
        raise ValueError(f"pragmas.{placeholder}: a {KNOBS[kind].split(':')[0]} is an integer, not {value!r}")
    factor = int(value)
    if not 1 <= factor <= MAX_FACTOR:
        raise ValueError(f"pragmas.{placeholder}: a factor lies in [1, {MAX_FACTOR}], not {factor}")
    return factor


def design_pragmas(pragmas: Mapping[str, object], placeholders: Collection[str]) -> dict[str, int | str]:
    """A design's value for every placeholder of its graph: the given ones checked, the rest defaulted.
    A pragma the graph has no placeholder for is an error that names it."""
    if unknown := sorted(set(pragmas) - set(placeholders)):
        raise ValueError(
            f"pragmas.{unknown[0]}: the graph has no placeholder for it"
            + (f" ({len(unknown) - 1} more unknown)" if len(unknown) > 1 else "")
            + f"; its placeholders: {', '.join(sorted(placeholders)) or 'none'}"
        )
    return {name: knob_value(name, value) for name, value in with_defaults(pragmas, placeholders).items()}


def with_defaults(pragmas: Mapping[str, object], placeholders: Collection[str]) -> dict[str, object]:
    """A value for every placeholder: the design's, else the loop as written (unchecked)."""
    return {name: pragmas.get(name, DEFAULTS[knob_kind(name)]) for name in sorted(placeholders)}


def factor(value: object) -> float:
    """A parallel or tile knob's factor: 1 where none is set or it is not a number."""
    try:
        return max(float(str(value)), 1.0)
    except ValueError:
        return 1.0


def pipeline_mode(value: object) -> str:
    """A pipeline knob's mode, ``off`` for a value that names none."""
    return str(value) if value in PIPELINE_MODES else "off"


@lru_cache(maxsize=8)
def known_kernels(datasets: Path | None) -> dict[str, str]:
    """Kernels whose program graphs the configured datasets hold, with each graph's path (read once
    per datasets folder)."""
    from preflight.data.sources import hlsyn

    return _known_files(datasets, hlsyn.GRAPHS, "_processed_result.gexf", hlsyn.kernel_graph)


@lru_cache(maxsize=8)
def known_sources(datasets: Path | None) -> dict[str, str]:
    """Kernels whose C sources the configured datasets hold, with each source's path (read once per
    datasets folder)."""
    from preflight.data.sources import hlsyn

    return _known_files(datasets, hlsyn.SOURCES, "_kernel.c", hlsyn.kernel_source)


def _known_files(
    datasets: Path | None, files: Path, suffix: str, find: Callable[[Path, str], str]
) -> dict[str, str]:
    """Each kernel with a file ``<kernel>{suffix}`` in the HLSyn folder ``files`` of the datasets, and
    the file's path (``find``)."""
    from preflight.data.sources import hlsyn

    folder = None if datasets is None else datasets / Path(hlsyn.FILE).parent
    if folder is None or not (folder / files).is_dir():
        return {}
    names = {p.name.removesuffix(suffix) for p in (folder / files).glob(f"*{suffix}")}
    kernels = names | {n.split("_")[0] for n in names}  # a MachSuite variant answers to its kernel
    return {k: path for k in sorted(kernels) if (path := find(folder, k))}


def is_source_text(spec: str) -> bool:
    """Whether a source is C text rather than a file's path: C spans lines or has braces or ``;``."""
    return any(mark in spec for mark in "\n{;")


#: Work units of a design (``models/core/budget.py``): parsing its graph and checking its pragmas costs
#: about twenty GEMM estimates, plus one per four nodes or edges of a graph sent inline (GEXF text: per
#: hundred characters) and one per hundred characters of a C source sent inline.
DESIGN_COST, GRAPH_ELEMENTS_PER_UNIT, GEXF_CHARACTERS_PER_UNIT = 20, 4, 100
SOURCE_CHARACTERS_PER_UNIT = 100


def item_cost(raw: dict) -> float:
    """A design's work from its raw fields."""
    code = raw.get("code")
    return (
        DESIGN_COST
        + _graph_cost(raw.get("graph"))
        + (len(code) / SOURCE_CHARACTERS_PER_UNIT if isinstance(code, str) else 0.0)
    )


def _graph_cost(graph: object) -> float:
    if isinstance(graph, dict):
        return sum(len(v) for v in graph.values() if isinstance(v, list)) / GRAPH_ELEMENTS_PER_UNIT
    if isinstance(graph, str):
        return len(graph) / GEXF_CHARACTERS_PER_UNIT
    return 0.0


class FpgaItem(BaseModel):
    """One HLS design: a kernel (by name, or by its program graph) and its pragma values."""

    model_config = ConfigDict(extra="forbid")

    kernel: str = Field(
        default="",
        description="a kernel whose graph the service's datasets hold (HLSyn's: 2mm, gemm-p...), or a "
        "name for the graph given",
        examples=["gemm-p"],
    )
    graph: str | dict = Field(
        default="",
        description="the kernel's ProGraML program graph with pragma placeholder nodes: GEXF text, or "
        '{"nodes": [{"text", "type", "full_text"}], "edges": [{"source", "target", "flow"}]}; '
        "empty: the named kernel's known graph",
    )
    pragmas: dict[str, StrictInt | str] = Field(
        default_factory=dict,
        description="a value per placeholder (__PARA__L0: 4, __PIPE__L1: 'flatten', __TILE__L0: 2); "
        "one left out leaves its loop as written",
        examples=[{"__PARA__L0": 4, "__PIPE__L0": "off", "__TILE__L0": 1}],
    )
    tool: Tool = Field(default="v20", description="v18: SDx 2018.3; v20: Vitis 2020.2")
    device: DeviceName = Field(default=BOARD, description="the FPGA board (a catalogue device of kind fpga)")
    code: str = Field(
        default="",
        max_length=MAX_SOURCE_CHARS,
        description="the kernel's C source with the graph's pragma placeholders "
        "(#pragma ACCEL PARALLEL FACTOR=auto{__PARA__L0} before a loop); empty: the named kernel's known "
        "source when the datasets hold one, else none (the model then does without it)",
    )

    @model_validator(mode="after")
    def _resolve(self, info: ValidationInfo) -> FpgaItem:
        """The graph resolved (from the kernel's name where none is given, in the datasets of the
        settings the caller validates with) and parsed, the pragmas checked against its
        placeholders, and the C source checked or, where none is given, resolved like the graph."""
        datasets = Settings.of_context(info.context).datasets
        if isinstance(self.graph, dict):
            self.graph = json.dumps(self.graph, sort_keys=True)
        if not self.graph:
            self.graph = _known_graph(self.kernel, datasets)
        elif not self.graph.lstrip().startswith(("<", "{")):  # never a path on the server's disk
            raise ValueError("graph: GEXF text (<gexf ...>) or a JSON object of nodes and edges")
        elif not self.kernel:
            self.kernel = "graph:" + hashlib.sha256(self.graph.encode()).hexdigest()[:10]
        try:
            graph = load_graph(self.graph)
        except DataError as exc:
            raise ValueError(f"graph: {exc}") from exc
        self.pragmas = design_pragmas(self.pragmas, graph.placeholders)
        if self.code:
            _check_code(self.code, graph.placeholders)
        elif self.kernel in (known := known_sources(datasets)):
            self.code = _known_source(known[self.kernel], graph.placeholders)
        return self


def _known_graph(kernel: str, datasets: Path | None) -> str:
    known = known_kernels(datasets)
    if kernel in known:
        return known[kernel]
    if not kernel:
        raise ValueError("kernel or graph: give a known kernel's name or the kernel's program graph")
    listed = (
        ", ".join(known) if known else "none (set PREFLIGHT_DATASETS to HLSyn's graphs, or send the graph)"
    )
    raise ValueError(f"kernel: no program graph is known for {kernel!r}; known kernels: {listed}")


def _check_code(code: str, placeholders: Collection[str]) -> None:
    """A client's C source: text (never a path on the server's disk) of a kernel whose placeholders
    the graph has, with at most ``MAX_SOURCE_LOOPS`` loops."""
    if not is_source_text(code):
        raise ValueError(
            "code: the kernel's C source text (with #pragma ACCEL placeholders), not a file's path"
        )
    if unknown := sorted(set(PLACEHOLDER.findall(code)) - set(placeholders)):
        raise ValueError(f"code: placeholders the graph lacks: {', '.join(unknown)}")
    if (loops := len(FOR_LOOP.findall(code))) > MAX_SOURCE_LOOPS:
        raise ValueError(f"code: {loops} loops; at most {MAX_SOURCE_LOOPS}")


def _known_source(path: str, placeholders: Collection[str]) -> str:
    """A known kernel's source path, or "" when it names placeholders the graph lacks (a graph sent
    for another kernel under a known kernel's name)."""
    names = _source_placeholders(path)
    return path if names is not None and names <= set(placeholders) else ""


@lru_cache(maxsize=64)
def _source_placeholders(path: str) -> frozenset[str] | None:
    """The placeholders a known source names (None if it cannot be read)."""
    try:
        return frozenset(PLACEHOLDER.findall(Path(path).read_text()))
    except (OSError, UnicodeDecodeError):
        return None
