"""Where the project is: the folder of tasks.py, the root every task's relative path starts at."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
