"""Target worlds an env may import: state builders, faithful tools and shared helpers per target.

An env module writes ``from trace_env.kits import tau2_airline`` and gets the target's records and tools,
so it only has to write what its capability adds. Kits run inside the sandbox like the SDK: stdlib only.
"""
