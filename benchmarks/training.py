"""asv suite: training throughput, time and memory per (mode, model, precision) of the framework
release installed in asv's environment (the release ledger: asv's commits are framework
releases, docs/releases.md).

One measurement per combination and environment: the first benchmark of a
combination to run measures it (``fwkernels.runner.measure``, fresh processes)
and stores the record in the class's ``setup_cache`` directory; the other
figures of that combination read the record.  A framework that is not
installed in this environment, or cannot run the model, is skipped with the
reason; a failed measurement (crash, OOM, NaN) fails its benchmarks with the
reason in stderr and in the records file. Mode "default" is each framework's default mode.

Profile switches (environment variables, read when asv discovers the suite):
  FWKERNELS_DEVICE      cpu (default) or cuda
  FWKERNELS_PRECISIONS  comma list (default: fp32 on cpu; fp32,tf32,bf16 on cuda)
  FWKERNELS_MODES       "default" (each framework's default mode), "tuned" (and the
                        compiled modes, FrameworkInfo.tuned_modes), "all", or a comma list
                        of "default" and mode names
  FWKERNELS_MODELS      comma list (default: all ten)
  FWKERNELS_SELECT      regular expression on "framework[:mode]/model/precision": other
                        combinations are skipped (e.g. tuned modes for one model only)
  FWKERNELS_WINDOWS, FWKERNELS_WINDOW_SECONDS   protocol overrides
"""
from __future__ import annotations

import os

from fwkernels import suite

DEVICE = os.environ.get("FWKERNELS_DEVICE", "cpu")


class Training:
    params = suite.parameters(DEVICE)
    param_names = ["mode", "model", "precision"]
    timeout = 3600  # one combination's measurement, model build and warm-up included
    # asv hides results whose version differs from the current one, and by default the version
    # is a hash of this file's code; the measurement is fwkernels' protocol, not this wrapper
    # (every record names the fwkernels commit that measured it), so it is fixed
    version = "1"

    def setup_cache(self) -> str:
        return suite.make_cache_dir()

    def setup(self, cache_dir: str, mode: str, model: str, precision: str) -> None:
        self.record = suite.measured(cache_dir, DEVICE, mode, model, precision)

    def track_samples_per_s(self, *args) -> dict:
        """Training throughput per timing window (images/s, tokens/s or samples/s): higher is better."""
        return suite.figures(self.record)["track_samples_per_s"]

    track_samples_per_s.unit = "samples/s"

    def track_time_per_sample(self, *args) -> dict:
        """Seconds per training sample, per window: the lower-is-better twin of samples/s."""
        return suite.figures(self.record)["track_time_per_sample"]

    track_time_per_sample.unit = "seconds"

    def track_train_step_time(self, *args) -> float:
        """Mean time of one training step (forward, backward, SGD update) per batch."""
        return suite.figures(self.record)["track_train_step_time"]

    track_train_step_time.unit = "seconds"

    def track_forward_backward_time(self, *args) -> float:
        """Mean forward+backward time per batch, no update (the convnet-benchmarks figure)."""
        return suite.figures(self.record)["track_forward_backward_time"]

    track_forward_backward_time.unit = "seconds"

    def track_forward_time(self, *args) -> float:
        """Mean forward-only (inference) time per batch."""
        return suite.figures(self.record)["track_forward_time"]

    track_forward_time.unit = "seconds"

    def track_peak_memory_train(self, *args) -> int:
        """Peak training memory: device allocator peak on GPU, RSS above baseline on CPU."""
        return suite.figures(self.record)["track_peak_memory_train"]

    track_peak_memory_train.unit = "bytes"

    def track_peak_memory_forward(self, *args) -> int:
        """Peak forward-only memory, measured in its own process."""
        return suite.figures(self.record)["track_peak_memory_forward"]

    track_peak_memory_forward.unit = "bytes"

    def track_warmup_time(self, *args) -> float:
        """Warm-up time (compilation, autotuning, first-step allocation), excluded from the rest."""
        return suite.figures(self.record)["track_warmup_time"]

    track_warmup_time.unit = "seconds"
