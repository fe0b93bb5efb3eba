"""pai: an OpenPAI-style GPU cluster job platform."""

__version__ = "0.1.0"
