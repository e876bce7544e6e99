"""Chainer 7.8.1, define-by-run on numpy (CuPy for CUDA) (runtime, models, backend)."""
