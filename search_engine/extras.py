"""Optional dependencies (pip extras): one error that tells the user exactly what to install.

Some features need a package most users never use — the llama-index adapter needs llama-index-core,
the sample-corpus maker needs reportlab — so those packages are extras of the `vrag-rl`
distribution, not core dependencies. A feature whose extra is missing fails on first use with
`MissingExtraError`, naming the feature, the package and the pip command, instead of a bare
`ModuleNotFoundError` from deep inside an import.
"""
from __future__ import annotations

import importlib


class MissingExtraError(ImportError):
    """A feature's optional package is not installed; the message says how to install it.

    An ImportError, so code that already treats a missing optional import as "feature unavailable"
    (`except ImportError`, `pytest.importorskip`) keeps working.
    """

    def __init__(self, feature: str, package: str, extra: str, cause: BaseException | None = None):
        self.feature, self.package, self.extra = feature, package, extra
        why = f" ({type(cause).__name__}: {cause})" if cause is not None else ""
        super().__init__(f"{feature} needs the optional package {package!r}, which cannot be imported{why}; "
                         f"install it with: pip install 'vrag-rl[{extra}]' (or: pip install {package})")


def require(module: str, *, feature: str, package: str, extra: str) -> None:
    """Import `module` or raise `MissingExtraError`: call it before doing any work, so nothing is half-written."""
    try:
        importlib.import_module(module)
    except ImportError as exc:
        raise MissingExtraError(feature, package, extra, exc) from exc
