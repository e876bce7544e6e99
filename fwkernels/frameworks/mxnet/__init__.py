"""MXNet 1.9.1 Gluon, hybridized or imperative (runtime, models, backend)."""
