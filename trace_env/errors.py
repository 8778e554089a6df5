"""The root of the errors raised inside the sandbox by the engine itself (not by env code's own bugs)."""


class TraceEnvError(Exception):
    """An env could not be loaded or driven; the message names the env and what went wrong."""
