"""The task boundary: a user error becomes one line and exit code 2."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

from invoke import Exit

F = TypeVar("F", bound=Callable[..., Any])


def user_errors(fn: F) -> F:
    """Turn a core.errors.UserError into one line on stderr and exit code 2; so too a storage fault
    (no space, read-only, permission denied) on a named file that no layer below turned into one."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        from core.errors import UserError

        try:
            return fn(*args, **kwargs)
        except UserError as exc:
            raise Exit(f"error: {exc}", code=2) from None
        except OSError as exc:
            from core.artifacts import STORAGE_ERRNOS, storage_error

            if exc.errno not in STORAGE_ERRNOS or not exc.filename:
                raise  # anything else is a bug and keeps its traceback
            raise Exit(f"error: {storage_error(exc, exc.filename)}", code=2) from None

    return wrapper  # type: ignore[return-value]
