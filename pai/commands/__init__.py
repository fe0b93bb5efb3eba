"""The composition root: the ``pai`` entry point joins the HTTP client commands (``pai.cli``) with the
commands that run processes (``master``, ``agent``, ``up``) or compute locally (``vc simulate``)."""
