"""Everything that runs INSIDE the sandbox, next to untrusted env code.

``trace_env`` is the env author's world and the engine that drives it:

- ``sdk``: the contract an env module implements (``TaskEnv``, ``Scenario``, ``Reward``, ``@tool`` ...);
- ``kits``: the target worlds (τ² airline and retail, ToolSandbox) as importable state builders and
  faithful tools, so an env writes only its capability;
- ``targets``: the shipped target profiles as plain JSON (tool schemas, policy, error style);
- ``actions``, ``engine``: agent turns parsed and episodes run, graded and recorded;
- ``loader``, ``handler``: load an env module and serve it to the host over the worker protocol.

It imports only the standard library and ``jsonschema``: never gymnasium, numpy or pydantic, so a
sandbox worker starts fast. Host-side code (the Gymnasium face, the registry, the validator) lives in
``env_registry`` and ``factory`` and only ever sees JSON from here.
"""
