"""Quality: suites of prompts with automatic checks, scored outputs as artifacts.

suites (YAML under data/suites/) -> matrix (which models answer which suites) -> worker
(child process: generation only) -> scorers (in the parent; code only in the sandbox)
-> a ``quality`` artifact per (model, settings, suite) under data/quality/.
"""
