"""JAX with Flax (linen) models and optax SGD, the training step under one jax.jit
(runtime, models, backend)."""
