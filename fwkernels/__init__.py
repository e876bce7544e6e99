"""fwkernels: training throughput of deep-learning frameworks on the standard models."""
from fwkernels.frameworks import get_framework, list_frameworks, load_backend
from fwkernels.models import MODELS, get_model, list_models

__version__ = "0.1.0"
__all__ = ["MODELS", "get_framework", "get_model", "list_frameworks", "list_models",
           "load_backend", "__version__"]
