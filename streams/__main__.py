"""``python -m streams`` is ``dcb``."""

from streams.cli.main import app

app()
