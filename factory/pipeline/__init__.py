"""``factory run``: TRACE end to end from one TOML file - rollouts, analyze, build, train, route, eval.

Each stage reads the files the previous ones wrote under one run folder and records what it handed on,
with a digest. A stage runs again only when its own config section, or what its inputs handed over, has
changed; an interrupted stage resumes. Modules: ``config`` (the TOML file as pydantic models), ``state``
(the run folder's record), ``runner`` (which stages run, in order), ``stages/`` (one module per stage),
``report`` (the closing Markdown report and its charts), ``digests``.
"""
