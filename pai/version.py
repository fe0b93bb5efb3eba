"""pai's version, in a module of its own: the servers import it from here, not from ``pai/__init__.py``, which an
interpreter may not have run. Under an editable install (``pip install -e``, whose finder comes after sys.path's), a
directory on sys.path holding a ``pai/`` that is no regular package (``python -m pai`` puts the working directory
first) makes ``pai`` a namespace package: its submodules still come from the install, its ``__init__`` does not."""

__version__ = "0.1.0"
