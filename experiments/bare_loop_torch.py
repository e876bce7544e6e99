"""A bare hand-written PyTorch training loop: the reference harness_overhead.py measures the
suite against.  The same model definition, data, optimizer and precision as the suite, none of
its code in the loop.  Prints the samples/s of each window as a JSON list.  AUTOTUNE (1 or 0,
default 1) sets ``torch.backends.cudnn.benchmark``.

    python experiments/bare_loop_torch.py MODEL DEVICE PRECISION BATCH STEPS WINDOWS WARMUP \
        THREADS [AUTOTUNE]
"""
import json, sys, time, torch, torch.nn.functional as F
from fwkernels.frameworks.torch.models import build
from fwkernels.models import get_model, NCF_USERS, NCF_ITEMS
model_name, device, precision, batch, steps, windows, warmup, threads = sys.argv[1:9]
batch, steps, windows, warmup, threads = map(int, (batch, steps, windows, warmup, threads))
torch.set_num_threads(threads)
torch.set_flush_denormal(True)
torch.backends.cudnn.benchmark = sys.argv[9:10] != ["0"]
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
