"""pai: an OpenPAI-style GPU cluster job platform."""

from pai.version import __version__

__all__ = ["__version__"]
