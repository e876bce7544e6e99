"""The precision policy overrides framework defaults explicitly, and results say so."""
import pytest

from fwkernels.frameworks.base import RunConfig
from fwkernels.models import get_model

EXPECTED = {"fp32": (False, "float32"), "tf32": (True, "float32"), "bf16": (False, "bfloat16")}


@pytest.mark.parametrize("order", [("tf32", "fp32", "bf16"), ("fp32", "tf32")])
def test_policy_is_applied_whatever_came_before(backend, order):
    reasons = []
    for precision in order:
        config = RunConfig(model=get_model("ncf"), batch=2, mode=backend.info.default_mode,
                           small=True, precision=precision)
        reason = backend.unsupported_reason(config)
        if reason:  # an N/A precision: the others in ``order`` are still checked
            reasons.append(f"{precision}: {reason}")
            continue
        settings = backend.build(config).precision_settings()
        assert settings["policy"] == precision
        assert (settings["tf32_enabled"], settings["compute_dtype"]) == EXPECTED[precision], settings
    if len(reasons) == len(order):
        pytest.skip(f"N/A: {'; '.join(reasons)}")
