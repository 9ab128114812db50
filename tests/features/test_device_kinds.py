"""A device kind is named once (``data/catalogue.KINDS``): its feature code is fixed, and a kind the
table does not define is an error in the featurizer, never a silent NaN."""

import numpy as np
import pytest
from preflight.data.catalogue import KINDS, DeviceSpec
from preflight.features.device import kind_codes


def test_kind_codes_are_the_ones_trained_models_read():
    codes = {name: kind.code for name, kind in KINDS.items()}
    assert codes == {"gpu": 0, "cpu": 2, "soc": 3, "accelerator": 1, "fpga": 4, "vm-host": 5, "unknown": None}


def test_a_device_known_by_measurements_or_none_has_no_code():
    gpu, unknown = DeviceSpec(id="a", name="A", kind="gpu"), DeviceSpec.known_by_measurements("B")
    np.testing.assert_array_equal(kind_codes([gpu, unknown, None]), [0.0, np.nan, np.nan])


def test_a_kind_the_table_does_not_define_is_an_error():
    tpu = DeviceSpec.model_construct(id="t", name="T", kind="tpu")  # past the schema's check
    with pytest.raises(KeyError, match="tpu"):
        kind_codes([tpu])
