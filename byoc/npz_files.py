"""Reading and writing ``.npz`` archives safely: never unpickling, every failure a
ByocError.

Three surfaces read archives: ``byoc run --inputs`` (a :class:`~byoc.errors.UsageError`),
a graph's weights file (a located :class:`~byoc.errors.GraphError`) and a JSON module's
large constants (a :class:`~byoc.errors.RuntimeFailure`); each calls :func:`read_npz`
with the error to raise and a phrase naming the file.
"""

from __future__ import annotations

import hashlib
import io
from collections.abc import Callable, Mapping
from typing import BinaryIO

import numpy as np

from .errors import ByocError

NEVER_UNPICKLES = "byoc never unpickles; save plain arrays with np.savez"


def read_npz(path: str | BinaryIO, what: str, error: Callable[..., ByocError]) -> dict[str, np.ndarray]:
    """Every array of the .npz archive at ``path`` (or in an open binary file); ``what``
    names it in messages ("--inputs x.npz"), ``error(message, hint=...)`` builds the
    error to raise."""
    try:
        data = np.load(path, allow_pickle=False)
        if not hasattr(data, "files"):  # a .npy file: one plain array, not a context manager
            raise error(f"{what} is a single array, not an .npz archive", hint="save with np.savez")
        with data:
            return {key: data[key] for key in data.files}
    except ByocError:
        raise
    except ValueError as exc:
        raise error(f"{what}: {exc}", hint=NEVER_UNPICKLES) from None
    except (OSError, EOFError) as exc:
        raise error(f"{what}: cannot read it as .npz ({exc})") from None
    except Exception as exc:  # zipfile and numpy's format module raise assorted errors on corrupt files
        raise error(f"{what} is not a valid .npz file ({type(exc).__name__}: {exc})") from None


def npz_bytes(arrays: Mapping[str, np.ndarray]) -> bytes:
    """The bytes of an uncompressed .npz archive holding ``arrays`` (for an atomic write)."""
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)
    return buffer.getvalue()


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()
