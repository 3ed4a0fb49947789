"""``python -m runtime.backends.openai_http.llama_cpp_server ARGS``: llama-cpp-python's server with this project's
library policy applied first (runtime/backends/llama_cpp/lib_policy.py), otherwise exactly ``python
-m llama_cpp.server``."""

from __future__ import annotations

import runpy
import sys

from runtime.backends.llama_cpp.lib_policy import apply

if __name__ == "__main__":
    decision = apply()
    print(
        f"almanac: use_extra_bufts={decision['use_extra_bufts']} ({decision['reason']})",
        file=sys.stderr,
        flush=True,
    )
    sys.argv[0] = "llama_cpp.server"
    runpy.run_module("llama_cpp.server", run_name="__main__", alter_sys=True)
