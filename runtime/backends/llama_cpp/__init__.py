"""llama-cpp-python in process: settings in ``config`` (no llama_cpp import), the backend in ``backend``."""
