"""NAS features: architecture encodings (a flat table for trees, node features for GNNs)
and the context an architecture is measured in (dataset, device spec sheet, batch size, runtime).

``X`` columns are named ``arch_*`` (the architecture) and ``ctx_*`` (the context); ``graphs`` holds
each distinct architecture's op graph, which a GNN reads with only the ``ctx_*`` columns of ``X``.
Everything is computed per distinct architecture and cached: scoring a whole space for one device
parses each architecture once.
"""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
from preflight.data import arch
from preflight.data.arch import OPS, SPACES, Node, OpGraph
from preflight.data.catalogue import Catalogue
from preflight.data.gemm import Dtype
from preflight.features import Features, GraphArrays, Graphs, device

#: Relative-depth bins of the flat encoding (positions carry meaning in chain spaces like FBNet).
DEPTH_BINS = 8
#: Kernel, expansion and groups are divided by this in graph node features, to sit near the one-hot's scale.
SIZE_SCALE = 8.0
#: Fixed vocabularies (never fitted per split); a value outside them is NaN and flagged as unseen.
DATASETS = (
    "cifar10",
    "cifar100",
    "imagenet",
    "imagenet16-120",
    "ninapro",
    "darcy",
    "cora",
    "citeseer",
    "pubmed",
    "cs",
    "physics",
    "photo",
    "computers",
    "arxiv",
    "proteins",
    "digits",
)
FRAMEWORKS = ("pytorch", "litert", "onnx", "torchmobile")
TARGETS = ("latency_ms", "energy_mj", "accuracy")
#: Node positions encoded one by one: in fixed-topology spaces (a NAS-Bench-201 edge, an FBNet layer)
#: a position has a meaning of its own.
POSITIONS = 24
#: Ops that carry weights (the rest move or drop data); their count along a path is its learnable depth.
WEIGHTED = frozenset({"conv", "mbconv", "gat", "gcn", "gin", "cheb", "sage", "arma", "graph", "fc"})
#: Roles of ops along a path: skip, weighted with a 1x1 (or no) kernel, weighted with a wider one, pooling.
ROLES = ("s", "w1", "w3", "p")
#: Input-to-output paths of at most this many ops are counted by their sequence of roles (the path
#: encoding of BANANAS, on roles so that it has one width for every space).
PATH_OPS = 3
PATHS = tuple(
    "-".join(seq) for length in range(1, PATH_OPS + 1) for seq in itertools.product(ROLES, repeat=length)
)
FLAT_COLUMNS = (
    "arch_n_nodes",
    "arch_n_edges",
    "arch_depth",
    "arch_space",
    "arch_paths_log2",
    "arch_output_reachable",
    "arch_max_weighted_depth",
    "arch_min_weighted_depth",
    *(f"arch_{kind}_{op}" for op in OPS for kind in ("count", "live", "sum_kernel", "sum_expansion")),
    *(f"arch_d{b}_{op}" for b in range(DEPTH_BINS) for op in OPS),
    *(f"arch_p{i}_{part}" for i in range(POSITIONS) for part in ("op", "kernel", "expansion")),
    *(f"arch_path_{path}" for path in PATHS),
)


#: Each flat column's place in a row.
_FLAT_AT = {column: i for i, column in enumerate(FLAT_COLUMNS)}


@arch.cached_when_short
def _flat_one(space: str, notation: str) -> np.ndarray:
    """One architecture's ``FLAT_COLUMNS`` (read-only: the cache hands the same array to every caller)."""
    g = arch.parse(space, notation)
    depths = g.depths()
    bins = np.minimum((depths / max(depths.max(), 1) * DEPTH_BINS).astype(int), DEPTH_BINS - 1)
    row = np.zeros(len(FLAT_COLUMNS))
    live, flow = _data_flow(g)
    counted = {
        "arch_n_nodes": len(g.nodes),
        "arch_n_edges": len(g.edges),
        "arch_depth": int(depths.max()),
        "arch_space": SPACES.index(g.space),
        **flow,
        **{f"arch_path_{path}": count for path, count in _short_paths(g).items()},
    }
    for column, value in counted.items():
        row[_FLAT_AT[column]] = value
    for i, (node, depth_bin) in enumerate(zip(g.nodes, bins)):
        row[_FLAT_AT[f"arch_count_{node.op}"]] += 1
        row[_FLAT_AT[f"arch_live_{node.op}"]] += live[i]
        row[_FLAT_AT[f"arch_d{depth_bin}_{node.op}"]] += 1
        row[_FLAT_AT[f"arch_sum_kernel_{node.op}"]] += node.kernel
        row[_FLAT_AT[f"arch_sum_expansion_{node.op}"]] += node.expansion
        if i < POSITIONS:
            at = _FLAT_AT[f"arch_p{i}_op"]
            row[at : at + 3] = (OPS.index(node.op) + 1, node.kernel, node.expansion)
    row.flags.writeable = False
    return row


def _role(node: Node) -> str | None:
    if node.op == "skip":
        return "s"
    if node.op in ("avgpool", "maxpool"):
        return "p"
    if node.op in WEIGHTED:
        return "w3" if node.kernel >= 3 or node.op not in ("conv", "mbconv") else "w1"
    return None  # zero cuts a path; input and output are its ends


#: Index of each role sequence of ``PATHS`` (and of the empty sequence), and per role the sequences
#: one more role extends (those shorter than ``PATH_OPS``) and the sequences each becomes (distinct).
_SEQUENCES = ((), *(tuple(path.split("-")) for path in PATHS))
_EXTENDABLE = np.array([i for i, seq in enumerate(_SEQUENCES) if len(seq) < PATH_OPS])
_EXTENDED = {
    role: np.array([_SEQUENCES.index((*_SEQUENCES[i], role)) for i in _EXTENDABLE]) for role in ROLES
}


def _short_paths(g: OpGraph) -> dict[str, float]:
    """How many input-to-output paths through at most ``PATH_OPS`` ops carry each role sequence,
    counted node by node in topological order (never listed: a dense graph has billions of them)."""
    n = len(g.nodes)
    adjacency = np.zeros((n, n))
    for a, b in g.edges:
        adjacency[a, b] = 1.0
    reaching = np.zeros((n, len(_SEQUENCES)))  # paths from the input to a node, by role sequence
    reaching[0, 0] = 1.0
    for node in range(1, n - 1):
        role = _role(g.nodes[node])
        if role is None:
            continue
        arriving = adjacency[:node, node] @ reaching[:node]
        reaching[node, _EXTENDED[role]] = arriving[_EXTENDABLE]  # each extension from one sequence
    ending = adjacency[:, n - 1] @ reaching
    return {path: float(ending[i]) for i, path in enumerate(PATHS, start=1) if ending[i]}


def _data_flow(g: OpGraph) -> tuple[np.ndarray, dict[str, float]]:
    """Which nodes lie on an input-to-output path that no ``zero`` op cuts, how many such paths
    there are, and the most and fewest weighted ops along one (a cell that drops its input learns little)."""
    n = len(g.nodes)
    alive = np.array([node.op != "zero" for node in g.nodes])
    weighted = np.array([node.op in WEIGHTED for node in g.nodes], dtype=float)
    edges = [(a, b) for a, b in g.edges if alive[a] and alive[b]]
    paths_in, paths_out = np.zeros(n), np.zeros(n)
    paths_in[0], paths_out[n - 1] = 1, 1
    deepest, shallowest = np.full(n, -np.inf), np.full(n, np.inf)
    deepest[0] = shallowest[0] = weighted[0]
    for a, b in sorted(edges):
        paths_in[b] += paths_in[a]
        deepest[b] = max(deepest[b], deepest[a] + weighted[b])
        shallowest[b] = min(shallowest[b], shallowest[a] + weighted[b])
    for a, b in sorted(edges, reverse=True):
        paths_out[a] += paths_out[b]
    reachable = paths_in[n - 1] > 0
    return (paths_in > 0) & (paths_out > 0), {
        "arch_paths_log2": float(np.log2(1 + paths_in[n - 1])),
        "arch_output_reachable": float(reachable),
        "arch_max_weighted_depth": float(deepest[n - 1]) if reachable else -1.0,
        "arch_min_weighted_depth": float(shallowest[n - 1]) if reachable else -1.0,
    }


def architecture_keys(spaces: np.ndarray, notations: np.ndarray) -> tuple[np.ndarray, list[str]]:
    """Each row's index into the distinct architectures, and those as ``"<space>\\0<notation>"`` keys."""
    codes, distinct = pd.factorize(pd.Series(spaces, dtype=str) + "\0" + pd.Series(notations, dtype=str))
    return codes.astype(np.int64), list(distinct)


def flat(spaces: np.ndarray, notations: np.ndarray) -> pd.DataFrame:
    """The fixed-width encoding for trees: size, depth, op counts overall and per relative-depth bin,
    kernel and expansion sums per op."""
    return _flat_rows(*architecture_keys(spaces, notations))


def _flat_rows(codes: np.ndarray, keys: list[str]) -> pd.DataFrame:
    table = (
        np.stack([_flat_one(*key.split("\0", 1)) for key in keys])
        if keys
        else np.empty((0, len(FLAT_COLUMNS)))
    )
    return pd.DataFrame(table[codes], columns=FLAT_COLUMNS)


NODE_FEATURES = len(OPS) + 3  # one-hot op, then kernel, expansion, groups


def node_features(g: OpGraph) -> np.ndarray:
    """Per node: a one-hot of the op over the fixed vocabulary, then kernel, expansion and groups."""
    x = np.zeros((len(g.nodes), NODE_FEATURES), dtype=np.float32)
    for i, node in enumerate(g.nodes):
        x[i, OPS.index(node.op)] = 1.0
        x[i, len(OPS) :] = (node.kernel, node.expansion, node.groups)
    return x


@arch.cached_when_short
def graph_arrays(key: str) -> GraphArrays:
    """The op graph of ``"<space>\\0<notation>"``: node features (sizes scaled) and edges both ways."""
    space, notation = key.split("\0", 1)
    g = arch.parse(space, notation)
    x = node_features(g)
    x[:, len(OPS) :] /= SIZE_SCALE
    edges = np.array(g.edges, dtype=np.int64).reshape(-1, 2).T
    return x, np.concatenate([edges, edges[::-1]], axis=1)


def codes(values: pd.Series, vocabulary: tuple[str, ...]) -> np.ndarray:
    """Each value's position in a fixed vocabulary (case-insensitive); NaN outside it."""
    lookup = {v.lower(): float(i) for i, v in enumerate(vocabulary)}
    return values.astype(str).str.lower().map(lookup).to_numpy(dtype=float)


def text(rows: pd.DataFrame, column: str) -> pd.Series:
    """A text column with missing values as ''."""
    if column not in rows:
        return pd.Series([""] * len(rows), index=rows.index)
    return rows[column].astype(object).where(rows[column].notna(), "").astype(str)


def architecture_in_context(rows: pd.DataFrame, catalogue: Catalogue) -> Features:
    """Features for canonical NAS rows (loaders' tables or API items as rows).

    ``meta["device_id"]`` is the device setting a latency belongs to: the catalogue id, plus the
    batch size when it is not 1 and the runtime when one is named (``nvidia-titan-rtx@b32``);
    ``meta["hardware"]`` is the catalogue id alone. Rows without a device (accuracy) have ``""``.
    """
    spaces, notations = rows["space"].astype(str).to_numpy(), rows["arch"].astype(str).to_numpy()
    names = text(rows, "device").to_numpy()
    by_name = {
        name: catalogue.resolve(name) for name in dict.fromkeys(names) if name
    }  # each distinct name once
    specs = [by_name.get(n) for n in names]
    spec = device.spec_columns(specs)
    batch = (
        pd.to_numeric(rows["batch_size"], errors="coerce").fillna(1).to_numpy(dtype=float)
        if "batch_size" in rows
        else np.ones(len(rows))
    )
    framework = text(rows, "framework")
    peak = np.array([np.nan if s is None else s.peak_tflops.get(Dtype.fp32, np.nan) for s in specs])
    context = pd.DataFrame(
        {
            "ctx_dataset": codes(rows["dataset"], DATASETS),
            "ctx_batch_log2": np.log2(batch),
            "ctx_framework": codes(framework, FRAMEWORKS),
            "ctx_device_kind": device.kind_codes(specs),
            "ctx_peak_fp32_log2": np.log2(peak),
            "ctx_bandwidth_log2": np.log2(spec["memory_bandwidth_gbs"]),
            **{
                f"ctx_{field}": spec[field]
                for field in ("compute_units", "boost_clock_mhz", "llc_mb", "tdp_w", "year")
            },
        }
    )
    hardware = np.array(["" if s is None else s.id for s in specs], dtype=object)
    setting = [
        h + (f"@b{int(b)}" if h and b != 1 else "") + (f"/{f}" if h and f else "")
        for h, b, f in zip(hardware, batch, framework)
    ]
    dataset = rows["dataset"].astype(str).str.lower().to_numpy()
    groups = text(rows, "arch_group").to_numpy()
    meta = pd.DataFrame(
        {
            "device_id": setting,
            "hardware": hardware,
            "dataset": dataset,
            "space": spaces,
            "arch": notations,
            # items from the API (no arch_group): the architecture itself
            "arch_group": np.where(groups != "", groups, notations),
            # calibration per dataset: errors on darcy's score and on CIFAR accuracy differ in scale
            "stratum": dataset,
        }
    )
    arch_of_row, keys = architecture_keys(spaces, notations)  # each distinct architecture is encoded once
    X = pd.concat([_flat_rows(arch_of_row, keys), context], axis=1)
    reference = pd.DataFrame(
        np.nan, index=X.index, columns=list(TARGETS)
    )  # no reference scale for any NAS target
    return Features(X=X, reference=reference, meta=meta, graphs=Graphs(keys, arch_of_row, graph_arrays))
