"""`ingot.cli`: the ``ingot`` command line (``ingot compile/run/inspect/bench``); see `ingot.cli.main`.

Example:
    $ ingot --help
"""
