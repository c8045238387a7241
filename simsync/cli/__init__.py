"""The ``simsync`` command line (``app.py``: the parser and ``main``; one module per command;
``options.py``: the arguments several commands share; ``shared.py``: what they do alike)."""

from simsync.cli.app import main

__all__ = ["main"]
