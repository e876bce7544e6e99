"""PaddlePaddle, dynamic graph or paddle.jit.to_static (runtime, models, backend)."""
