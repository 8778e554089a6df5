"""Built-in worker handlers (``python -m sandbox.worker sandbox.handlers.<name>``)."""
