"""The OpenAI-compatible HTTP backend: any server that streams chat completions
(llama-server, python -m llama_cpp.server, vLLM, Ollama), started by the run or already running."""

NAME = "openai_http"  # the backend's registered name (runtime.backends.BACKENDS)
