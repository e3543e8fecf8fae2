"""trainlint: static checks for PyTorch training code."""

__version__ = "0.1.0"
