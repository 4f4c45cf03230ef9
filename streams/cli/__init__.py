"""The ``dcb`` command line: one module per command group."""
