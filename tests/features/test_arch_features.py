import numpy as np
import pandas as pd
from preflight.data import arch
from preflight.features import arch as featurize

NB201 = "|nor_conv_3x3~0|+|nor_conv_3x3~0|avg_pool_3x3~1|+|skip_connect~0|none~1|nor_conv_1x1~2|"
FBNET = (
    "k5_e6|skip|k3_e1_g2|skip|k5_e1|skip|skip|skip|k5_e6|k5_e1|k3_e1_g2|"
    "k5_e1|k5_e6|k3_e6|k3_e3|k5_e6|k3_e6|k3_e3|k5_e1|k3_e3|k5_e1|k5_e1_g2"
)


GRAPH = '{"link": "0-0-0-0", "ops": ["gat", "gat", "gat", "gat"]}'


def test_flat_encoding_has_one_width_across_spaces():
    table = featurize.flat(np.array(["nb201", "fbnet", "nasbench-graph"]), np.array([NB201, FBNET, GRAPH]))
    assert list(table.columns) == list(featurize.FLAT_COLUMNS) and not table.isna().any().any()
    assert table.loc[0, "arch_count_conv"] == 3 and table.loc[1, "arch_count_mbconv"] == 17
    assert table.loc[2, "arch_count_gat"] == 4 and table.loc[1, "arch_space"] == arch.SPACES.index("fbnet")


def test_node_features_one_hot_the_op():
    x = featurize.node_features(arch.from_nb201(NB201))
    assert x.shape == (8, featurize.NODE_FEATURES) and (x[:, : len(arch.OPS)].sum(axis=1) == 1).all()


def test_flat_encoding_is_finite_and_counts_kernels():
    table = featurize.flat(np.array(["nb201"]), np.array([NB201]))
    assert np.isfinite(table.to_numpy(dtype=float)).all()
    assert table.loc[0, "arch_sum_kernel_conv"] == 3 + 3 + 1


def test_context_and_device_settings(catalogue):
    rows = pd.DataFrame(
        {
            "space": ["nb201"] * 3,
            "arch": [NB201] * 3,
            "dataset": ["CIFAR10", "cifar100", "mnist-ish"],
            "device": ["titan_rtx", "titan_rtx", None],
            "batch_size": [1, 32, None],
            "framework": [None, "onnx", None],
        }
    )
    features = featurize.architecture_in_context(rows, catalogue)
    assert list(features.meta["device_id"]) == ["nvidia-titan-rtx", "nvidia-titan-rtx@b32/onnx", ""]
    assert list(features.meta["hardware"]) == ["nvidia-titan-rtx", "nvidia-titan-rtx", ""]
    assert features.X.loc[0, "ctx_dataset"] == featurize.DATASETS.index("cifar10")
    assert np.isnan(features.X.loc[2, "ctx_dataset"]) and np.isnan(features.X.loc[2, "ctx_peak_fp32_log2"])
    assert features.X.loc[1, "ctx_batch_log2"] == 5
    assert (
        list(features.meta["arch_group"]) == [NB201] * 3
    )  # no group given: the architecture is its own group
