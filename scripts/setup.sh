#!/usr/bin/env bash
# Installs trace-factory into the current Python environment.
#   bash scripts/setup.sh         core install (what `factory build` needs)
#   bash scripts/setup.sh --dev   + test tools and the sandbox backends' system services (bubblewrap,
#                                 Docker daemon, offline sandbox image); needs root or sudo for apt.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3}"

"$PYTHON" -m pip install --quiet --disable-pip-version-check -e .

if [[ "${1:-}" == "--dev" ]]; then
    "$PYTHON" -m pip install --quiet --disable-pip-version-check -e ".[dev,llm,docker,e2b]"
    if [[ -x scripts/sandbox-services.sh ]]; then
        PYTHON="$PYTHON" bash scripts/sandbox-services.sh
    fi
fi
