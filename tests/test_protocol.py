"""The measurement protocol with fake steps of known cost on a fake clock."""
import math

import pytest

from fwkernels.protocol import (NonFiniteLoss, calibrate_steps, finite_loss_check, run_windows,
                                summarize)


class FakeDevice:
    """Steps queue work; only sync() advances the clock by the queued cost (like a GPU)."""

    def __init__(self, costs):
        self.now = 0.0
        self.queued = 0.0
        self.costs = iter(costs)
        self.syncs = 0

    def clock(self):
        return self.now

    def step(self):
        self.queued += next(self.costs)

    def sync(self):
        self.now += self.queued
        self.queued = 0.0
        self.syncs += 1


def test_known_cost_gives_exact_throughput_and_spread():
    # 2 warm-up steps of 5 s, then 3 windows of 4 steps costing 0.1, 0.2, 0.25 s each.
    costs = [5.0, 5.0] + [0.1] * 4 + [0.2] * 4 + [0.25] * 4
    dev = FakeDevice(costs)
    t = run_windows(dev.step, dev.sync, windows=3, steps=4, warmup=2, samples_per_step=8,
                    clock=dev.clock)
    assert t.warmup_s == pytest.approx(10.0)
    assert t.window_s == pytest.approx([0.4, 0.8, 1.0])
    assert t.window_samples_per_s == pytest.approx([80.0, 40.0, 32.0])
    s = t.summary()
    assert s["samples_per_s"] == pytest.approx(152 / 3)
    assert s["samples_per_s_median"] == pytest.approx(40.0)
    expected_std = math.sqrt(((80 - 152 / 3) ** 2 + (40 - 152 / 3) ** 2 + (32 - 152 / 3) ** 2) / 2)
    assert s["samples_per_s_std"] == pytest.approx(expected_std)
    assert s["samples_per_s_cv"] == pytest.approx(expected_std / (152 / 3))
    assert t.step_time_s == pytest.approx(2.2 / 12)


def test_a_multi_step_loop_runs_each_window_in_one_call():
    """run_steps (Keras' fit) takes the warm-up, the calibration step and each window whole."""
    dev = FakeDevice([2.0] * 3 + [0.5] + [0.5] * 8)
    calls = []

    def run_steps(count):
        calls.append(count)
        for _ in range(count):
            dev.step()

    t = run_windows(None, dev.sync, windows=2, steps=None, warmup=3, samples_per_step=1,
                    target_window_s=2.0, clock=dev.clock, run_steps=run_steps)
    assert calls == [3, 1, 4, 4]
    assert t.steps == 4 and t.window_s == pytest.approx([2.0, 2.0])


def test_warmup_is_excluded_from_windows():
    slow_warmup = FakeDevice([100.0] * 3 + [1.0] * 6)
    t = run_windows(slow_warmup.step, slow_warmup.sync, windows=2, steps=3, warmup=3,
                    samples_per_step=1, clock=slow_warmup.clock)
    assert t.window_s == pytest.approx([3.0, 3.0])
    assert t.warmup_s == pytest.approx(300.0)


def test_every_window_is_closed_by_a_sync():
    dev = FakeDevice([1.0] * 10)
    t = run_windows(dev.step, dev.sync, windows=4, steps=2, warmup=2, samples_per_step=1,
                    clock=dev.clock)
    assert dev.syncs == 5  # once after warm-up, once per window
    # Without the sync the asynchronous steps would cost nothing inside the windows.
    assert t.window_s == pytest.approx([2.0] * 4)


def test_calibration_sizes_windows_to_the_target():
    dev = FakeDevice([0.03] * 2)
    assert calibrate_steps(dev.step, dev.sync, 0.5, clock=dev.clock) == 17


def test_calibration_comes_after_the_warmup():
    # A first step that compiles for 60 s must not shrink the windows to one step.
    dev = FakeDevice([60.0, 0.1, 0.1, 0.1] + [0.1] * 100)
    t = run_windows(dev.step, dev.sync, windows=2, steps=None, warmup=3, samples_per_step=1,
                    target_window_s=1.0, clock=dev.clock)
    assert t.warmup_s == pytest.approx(60.2)
    assert t.steps == 10 and t.window_s == pytest.approx([1.0, 1.0])


def test_summary_of_a_single_value_has_no_spread():
    assert summarize([5.0]) == {"mean": 5.0, "std": 0.0, "median": 5.0, "cv": 0.0}


def test_non_finite_loss_is_raised_not_timed():
    losses = iter([1.0, float("nan")])
    dev = FakeDevice([1.0] * 10)
    with pytest.raises(NonFiniteLoss):
        run_windows(dev.step, dev.sync, windows=3, steps=2, warmup=1, samples_per_step=1,
                    clock=dev.clock, check=finite_loss_check(lambda: next(losses)))


@pytest.mark.parametrize("bad", [dict(windows=0), dict(steps=0), dict(warmup=-1)])
def test_invalid_protocol_arguments(bad):
    args = dict(windows=1, steps=1, warmup=0, samples_per_step=1) | bad
    with pytest.raises(ValueError):
        run_windows(lambda: None, lambda: None, **args)
