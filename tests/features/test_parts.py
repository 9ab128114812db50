import numpy as np
import pandas as pd
from preflight.features import Features, Parts, Pieces, bare, concat


def parts() -> Parts:
    return Parts(pd.DataFrame({"v": [10, 11, 12, 20, 30, 31]}), np.array([0, 0, 0, 1, 2, 2]))


def test_take_follows_the_rows_in_order_with_repeats():
    taken = parts().take(np.array([2, 0, 2]))
    assert taken.owner.tolist() == [0, 0, 1, 1, 1, 2, 2]
    assert taken.frame["v"].tolist() == [30, 31, 10, 11, 12, 30, 31]
    assert parts().take(np.array([], dtype=int)).frame.empty


def test_concat_offsets_owners_by_the_rows_before():
    both = Parts.concat([parts(), parts().take(np.array([1]))], [3, 1])
    assert both.owner.tolist() == [0, 0, 0, 1, 2, 2, 3]
    assert both.frame["v"].tolist()[-1] == 20


def with_gemms() -> Parts:
    """Parts whose first and last part hold GEMM kernels (two and one)."""
    gemms = bare(pd.DataFrame({"g": [100.0, 101.0, 300.0]}), "t")
    return Parts(parts().frame, parts().owner, gemms, np.array([0, 0, 5]))


def test_take_and_concat_keep_each_parts_gemm_kernels_with_it():
    taken = with_gemms().take(np.array([2, 0]))
    assert taken.gemms is not None and taken.gemm_part is not None
    assert taken.gemms.X["g"].tolist() == [300.0, 100.0, 101.0]
    assert taken.frame["v"].to_numpy()[taken.gemm_part].tolist() == [31, 10, 10]
    both = Parts.concat([parts().take(np.array([1])), with_gemms()], [1, 3])
    assert both.gemms is not None and both.gemm_part is not None
    assert both.frame["v"].to_numpy()[both.gemm_part].tolist() == [10, 10, 31]
    none = with_gemms().take(np.array([1])).gemms
    assert none is not None and none.X.empty


def features_with_pieces() -> Features:
    """Three items; the first has two pieces, the last one, which has one of its own."""
    items = bare(pd.DataFrame({"v": [1.0, 2.0, 3.0]}), "t")
    pieces = bare(pd.DataFrame({"v": [0.5, 0.25, 1.5, 0.75]}), "t")
    owner, depth = np.array([0, 0, 2, 2]), np.array([1, 1, 1, 2])
    items.pieces = Pieces(
        pieces, owner, depth, np.array([8.0, 64.0, 8.0, 1.0]), np.array([0.0, 1.0, 0.0, 2.0])
    )
    return items


def test_take_and_concat_keep_each_items_pieces_with_it_at_every_depth():
    taken = features_with_pieces().take(np.array([2, 0]))
    assert taken.pieces is not None
    assert taken.pieces.owner.tolist() == [0, 1, 1, 0] and taken.pieces.depth.tolist() == [1, 1, 1, 2]
    assert taken.pieces.features.X["v"].tolist() == [1.5, 0.5, 0.25, 0.75]
    assert taken.pieces.count.tolist() == [8.0, 8.0, 64.0, 1.0] and taken.pieces.extra_ms.tolist() == [
        0,
        0,
        1,
        2,
    ]
    both = concat([bare(pd.DataFrame({"v": [9.0]}), "t"), features_with_pieces()])
    assert both.pieces is not None and both.pieces.owner.tolist() == [1, 1, 3, 2]
    twice = concat([features_with_pieces(), features_with_pieces()])
    assert twice.pieces is not None and twice.pieces.owner.tolist() == [0, 0, 2, 2, 3, 3, 5, 6]
    assert features_with_pieces().take(np.array([1])).pieces.features.X.empty
