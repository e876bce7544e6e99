"""Harness overhead: the suite's samples/s against a bare hand-written training loop.

    python scripts/harness_overhead.py [--framework torch|jax] [--device cpu|cuda]
        [--precision fp32|tf32|bf16] [--models resnet50,ncf] [--steps N] [--windows K]
        [--markdown FILE]

For each model the suite's figure comes from ``fwkernels.runner.measure`` (its
fresh worker processes, Workload methods, window protocol); the bare figure
from the plain loop below, in a fresh process too, with the same model
definition, batch, data, optimizer, precision, threads, steps and windows.
Both use the same fixed steps per window, so only the harness differs.
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time

BARE_LOOP = r"""
import json, sys, time, torch, torch.nn.functional as F
from fwkernels.frameworks.torch_models import build
from fwkernels.models import get_model, NCF_USERS, NCF_ITEMS
model_name, device, precision, batch, steps, windows, warmup, threads = sys.argv[1:9]
batch, steps, windows, warmup, threads = map(int, (batch, steps, windows, warmup, threads))
torch.set_num_threads(threads)
torch.set_flush_denormal(True)
strict = precision != "tf32"
torch.backends.cuda.matmul.allow_tf32 = not strict
torch.backends.cudnn.allow_tf32 = not strict
spec = get_model(model_name)
torch.manual_seed(0)
model = build(model_name).to(device)
if spec.name == "ncf":
    inputs = (torch.randint(0, NCF_USERS, (batch,), device=device),
              torch.randint(0, NCF_ITEMS, (batch,), device=device))
    labels = torch.randint(0, 2, (batch,), device=device).float()
    loss_fn = F.binary_cross_entropy_with_logits
elif spec.unit == "tokens":
    src_len, tgt_len = spec.inputs["src"][0], spec.inputs["tgt"][0]
    inputs = (torch.randint(0, spec.num_classes, (batch, src_len), device=device),
              torch.randint(0, spec.num_classes, (batch, tgt_len), device=device))
    labels = torch.randint(0, spec.num_classes, (batch, tgt_len), device=device)
    loss_fn = lambda y, t: F.cross_entropy(y.flatten(0, 1).float(), t.flatten(), label_smoothing=0.1)
else:
    inputs = (torch.randn(batch, *spec.inputs["image"], device=device),)
    labels = torch.randint(0, 1000, (batch,), device=device)
    loss_fn = lambda y, t: F.cross_entropy(y.float(), t)
lr = spec.lr * batch / spec.batch_gpu
opt = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9, weight_decay=1e-4)
dtype = torch.bfloat16 if precision == "bf16" else None

def step():
    opt.zero_grad(set_to_none=True)
    with torch.autocast(torch.device(device).type, dtype=dtype, enabled=dtype is not None):
        loss = loss_fn(model(*inputs), labels)
    loss.backward()
    opt.step()

def sync():
    if device == "cuda":
        torch.cuda.synchronize()

for _ in range(warmup):
    step()
sync()
rates = []
for _ in range(windows):
    start = time.perf_counter()
    for _ in range(steps):
        step()
    sync()
    rates.append(spec.samples_per_step(batch) * steps / (time.perf_counter() - start))
print(json.dumps(rates))
"""

# The same for JAX/Flax: the suite's Flax modules, one jitted step with the state donated.
BARE_LOOP_JAX = r"""
import json, os, sys, time
model_name, device, precision, batch, steps, windows, warmup, threads = sys.argv[1:9]
batch, steps, windows, warmup = map(int, (batch, steps, windows, warmup))
os.environ["PJRT_NPROC"] = threads  # XLA's CPU thread pool, read when the client starts
import jax, jax.numpy as jnp, numpy as np, optax
from fwkernels.frameworks.flax_models import build
from fwkernels.models import get_model, NCF_USERS, NCF_ITEMS
spec = get_model(model_name)
dev = jax.devices("gpu" if device == "cuda" else "cpu")[0]
rng = np.random.default_rng(0)
if spec.name == "ncf":
    inputs = (rng.integers(0, NCF_USERS, (batch,), dtype=np.int32),
              rng.integers(0, NCF_ITEMS, (batch,), dtype=np.int32))
    labels = rng.integers(0, 2, (batch,)).astype(np.float32)
    loss_fn = lambda y, t: optax.sigmoid_binary_cross_entropy(y.astype(jnp.float32), t).mean()
elif spec.unit == "tokens":
    src_len, tgt_len = spec.inputs["src"][0], spec.inputs["tgt"][0]
    inputs = (rng.integers(0, spec.num_classes, (batch, src_len), dtype=np.int32),
              rng.integers(0, spec.num_classes, (batch, tgt_len), dtype=np.int32))
    labels = rng.integers(0, spec.num_classes, (batch, tgt_len), dtype=np.int32)
    def loss_fn(y, t):
        log_probs = jax.nn.log_softmax(y.astype(jnp.float32), -1)
        target = jnp.take_along_axis(log_probs, t[..., None], -1)[..., 0]
        return -(0.9 * target + 0.1 * log_probs.mean(-1)).mean()
else:
    channels, height, width = spec.inputs["image"]
    inputs = (rng.standard_normal((batch, height, width, channels), dtype=np.float32),)
    labels = rng.integers(0, spec.num_classes, (batch,), dtype=np.int32)
    loss_fn = lambda y, t: optax.softmax_cross_entropy_with_integer_labels(
        y.astype(jnp.float32), t).mean()
inputs, labels = jax.device_put((inputs, labels), dev)
model = build(model_name, jnp.bfloat16 if precision == "bf16" else jnp.float32)
tx = optax.chain(optax.add_decayed_weights(1e-4),
                 optax.sgd(spec.lr * batch / spec.batch_gpu, momentum=0.9))
key = jax.random.key(0)
with jax.default_device(dev):
    variables = jax.jit(model.init)(key, *(x[:1] for x in inputs))
    params, stats = variables["params"], variables.get("batch_stats", {})
    opt_state = jax.jit(tx.init)(params)
    count = jnp.zeros((), jnp.int32)

def train_step(params, stats, opt_state, count, inputs, labels):
    def loss_of(p):
        logits, updates = model.apply({"params": p, "batch_stats": stats}, *inputs, train=True,
                                      rngs={"dropout": jax.random.fold_in(key, count)},
                                      mutable=["batch_stats"])
        return loss_fn(logits, labels), updates
    (loss, updates), grads = jax.value_and_grad(loss_of, has_aux=True)(params)
    steps_, opt_state = tx.update(grads, opt_state, params)
    return (optax.apply_updates(params, steps_), updates.get("batch_stats", stats), opt_state,
            count + 1, loss)

step = jax.jit(train_step, donate_argnums=(0, 1, 2, 3))
with jax.default_matmul_precision("tensorfloat32" if precision == "tf32" else "highest"):
    def run(n):
        global params, stats, opt_state, count
        for _ in range(n):
            params, stats, opt_state, count, loss = step(params, stats, opt_state, count,
                                                         inputs, labels)
        jax.block_until_ready(loss)
    run(warmup)
    rates = []
    for _ in range(windows):
        start = time.perf_counter()
        run(steps)
        rates.append(spec.samples_per_step(batch) * steps / (time.perf_counter() - start))
print(json.dumps(rates))
"""
BARE_LOOPS = {"torch": BARE_LOOP, "jax": BARE_LOOP_JAX}


def bare_rates(framework: str, model: str, device: str, precision: str, batch: int, steps: int,
               windows: int, warmup: int, threads: int) -> list:
    args = [model, device, precision, batch, steps, windows, warmup, threads]
    out = subprocess.run([sys.executable, "-c", BARE_LOOPS[framework], *map(str, args)], check=True,
                         capture_output=True, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> int:
    from fwkernels.models import MODELS
    from fwkernels.runner import DEFAULTS, default_threads, measure

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--framework", default="torch", choices=sorted(BARE_LOOPS))
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--precision", default="fp32")
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--windows", type=int, default=None)
    parser.add_argument("--markdown")
    args = parser.parse_args()
    windows = args.windows or DEFAULTS[args.device][0]
    warmup = DEFAULTS[args.device][2]
    threads = default_threads()
    command = "python scripts/harness_overhead.py " + " ".join(sys.argv[1:])
    lines = [f"Generated by `{command}` ({windows} windows x {args.steps} steps, {threads} threads).",
             "", "| model | batch | suite (mean ± std) | bare loop (mean ± std) | suite / bare |",
             "|---|---|---|---|---|"]
    start = time.perf_counter()

    def write(rows: list) -> str:  # after every model: a run stopped part-way keeps its rows
        text = "\n".join(rows) + "\n"
        if args.markdown:
            with open(args.markdown, "w") as f:
                f.write(text)
        return text

    for model in args.models.split(","):
        spec = MODELS[model]
        batch = spec.default_batch(args.device)
        record = measure(args.framework, model, device=args.device, precision=args.precision,
                         windows=windows, steps=args.steps, warmup=warmup, threads=threads,
                         phases=("train",))
        if record["status"] != "ok":
            lines.append(f"| {model} | {batch} | {record['status']}: {record.get('error')} | | |")
            write(lines)
            continue
        bare = bare_rates(args.framework, model, args.device, args.precision, batch, args.steps,
                          windows, warmup, threads)
        suite_mean, bare_mean = record["samples_per_s"], statistics.fmean(bare)
        bare_std = statistics.stdev(bare) if len(bare) > 1 else 0.0
        lines.append(f"| {model} | {batch} | {suite_mean:,.4g} ± {record['samples_per_s_std']:.2g} "
                     f"| {bare_mean:,.4g} ± {bare_std:.2g} | {suite_mean / bare_mean:.3f} |")
        print(lines[-1], flush=True)
        write(lines)
    lines += ["", f"Wall time: {time.perf_counter() - start:.0f} s."]
    print(write(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
