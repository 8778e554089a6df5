"""The factory: capability analysis, environment synthesis and validation, and the ``factory`` CLI."""
