"""``python -m service.cli``: the ``autograde`` command."""

from service.cli.parser import entry_point

entry_point()
