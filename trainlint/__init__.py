"""trainlint: static checks for PyTorch training code."""

import os
import sys

__version__ = "0.1.0"


def _source_checkout() -> str | None:
    """The repository root when this package is imported straight from a source checkout, else None.

    pyproject.toml maps ``trainlint.analysis`` to ``analysis/`` (and ``estimator/``, ``server/``
    likewise), so an install has them inside the package, but this folder in a checkout does not.
    Python run from the checkout's root (``python -c``, pytest) imports this folder instead of the
    install; searching the root as well makes ``trainlint.analysis`` the checkout's ``analysis/``.
    An installed package (a wheel, or the strict editable install's link tree in ``build/``) has
    no such neighbours and is left alone. The root is only searched when this very file was already
    imported from it, so the checkout's code runs either way: a user's workspace gains nothing, and
    the CLI and the server keep the working directory off ``sys.path`` (``trainlint/__main__.py``).
    """
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    pyproject = os.path.join(root, "pyproject.toml")
    if not (os.path.isfile(os.path.join(root, "analysis", "__init__.py")) and os.path.isfile(pyproject)):
        return None
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # tomli is a dependency on Python 3.10 only, so a type checker run on 3.11+ cannot see it
        import tomli as tomllib  # pyright: ignore[reportMissingImports]
    try:
        with open(pyproject, "rb") as file:
            project = tomllib.load(file).get("project", {})
    except (OSError, tomllib.TOMLDecodeError):
        return None
    return root if project.get("name") == "trainlint" else None


_checkout = _source_checkout()
if _checkout is not None:
    __path__.append(_checkout)
del _checkout
