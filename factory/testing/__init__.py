"""Test support that ships with the product, the way httpx ships ``MockTransport``.

- :mod:`factory.testing.llm_server`: a scripted OpenAI/Anthropic-compatible HTTP server on 127.0.0.1, so
  the real ``openai`` and ``anthropic`` SDKs can be driven with no network and no key (offline demos, tests
  of code that calls ``factory`` with an LLM).
- :mod:`factory.testing.injection`: synthetic τ² trajectories with known, injected capability deficits, to
  check a labeler and to benchmark ``factory analyze``.

Nothing in the product imports this package.
"""
