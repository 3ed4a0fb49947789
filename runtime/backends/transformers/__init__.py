"""Hugging Face transformers on PyTorch, in process: settings in ``config`` (imports neither torch
nor transformers), the backend in ``backend``. An optional extra: ``pip install -e '.[transformers]'``."""
