"""A bare hand-written JAX/Flax training loop (the suite's Flax modules, one jitted step with
the state donated): the reference harness_overhead.py --framework jax measures the suite against.
Prints the samples/s of each window as a JSON list.

    python experiments/bare_loop_jax.py MODEL DEVICE PRECISION BATCH STEPS WINDOWS WARMUP THREADS
"""
import json, os, sys, time
model_name, device, precision, batch, steps, windows, warmup, threads = sys.argv[1:9]
batch, steps, windows, warmup = map(int, (batch, steps, windows, warmup))
os.environ["PJRT_NPROC"] = threads  # XLA's CPU thread pool, read when the client starts
import jax, jax.numpy as jnp, numpy as np, optax
from fwkernels.frameworks.jax.models import build
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
