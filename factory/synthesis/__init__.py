"""LLM environment synthesis: prompt, extract code, validate in the sandbox, repair, repeat."""
