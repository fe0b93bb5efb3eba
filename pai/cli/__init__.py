"""The ``pai`` command-line client: click commands that talk to the master over HTTP only."""
