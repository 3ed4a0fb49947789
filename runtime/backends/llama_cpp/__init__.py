"""llama-cpp-python in process: settings in ``config`` (no llama_cpp import), the backend in ``backend``."""

NAME = "llama_cpp"  # the backend's registered name (runtime.backends.BACKENDS)
# Native libraries loaded before anything else in a worker (runtime.backends.preload): llama.cpp's
# CUDA build must be loaded before numpy on some images.
PRELOAD = ("llama_cpp",)
