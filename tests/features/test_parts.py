import numpy as np
import pandas as pd
from preflight.features import Parts


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
