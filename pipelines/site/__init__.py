"""Site rendering: Markdown and chart builders (unit-tested), and the thin mkdocs-macros module."""
