"""PyTorch: torchvision models where it defines them, eager or compiled (runtime, models, backend)."""
