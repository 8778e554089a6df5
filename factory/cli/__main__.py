"""``python -m factory.cli``: the same as the ``factory`` command."""

from factory.cli import main

main()
