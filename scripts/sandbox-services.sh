#!/usr/bin/env bash
# Make the sandbox backends usable on a fresh Debian machine (CI runs this as root).
#   bash scripts/sandbox-services.sh          bubblewrap and Docker (daemon + offline image)
#   bash scripts/sandbox-services.sh bwrap    bubblewrap only (enough for `factory build`)
#
# Idempotent: installs bubblewrap, python3-seccomp (the syscall filter is compiled with it) and
# docker.io only if missing, starts dockerd only if `docker info` does not answer, builds the
# offline sandbox image only if it is missing. Ends with `factory sandbox status`: which backends
# work and which aggregate limits this host can hold (cgroup version, seccomp) - the sandbox
# reports the same at run time.
# Runs after the package is installed (scripts/setup.sh installs first): the sandbox steps are
# `factory sandbox ...` commands, run as `$PY -m factory.cli` so they use the interpreter that was
# installed into even where its `factory` script is not on PATH.
# Never fails the caller because docker could not start: it prints why and exits 0, and
# the docker tests then skip with the reason from sandbox.available_backends().
set -u

PY="${PYTHON:-python}"
IMAGE="${TRACE_SANDBOX_IMAGE:-trace-factory-sandbox:py311}"
log() { echo "[sandbox-services] $*"; }
here="$(cd "$(dirname "$0")/.." && pwd)"
factory() { (cd "$here" && "$PY" -m factory.cli "$@"); }
# sandboxes left behind by processes that were killed (their leases and labels name them), then the report
finish() {
  factory sandbox reap >/dev/null 2>&1 || true
  factory sandbox status || log "no isolating sandbox backend is usable on this machine"
  exit 0
}
SUDO=""
if [ "$(id -u)" != "0" ]; then
  if command -v sudo >/dev/null 2>&1; then SUDO="sudo"; else log "not root and no sudo: cannot install packages"; fi
fi

apt_updated=0
apt_install() {
  if ! command -v apt-get >/dev/null 2>&1; then log "no apt-get: cannot install $*"; return 1; fi
  if [ "$apt_updated" = 0 ]; then
    $SUDO apt-get update -qq >/tmp/sandbox-services-apt.log 2>&1 || log "apt-get update failed (see /tmp/sandbox-services-apt.log)"
    apt_updated=1
  fi
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "$@" \
    >>/tmp/sandbox-services-apt.log 2>&1
}

# --- bubblewrap -----------------------------------------------------------------------
if ! command -v bwrap >/dev/null 2>&1; then
  log "installing bubblewrap"
  apt_install bubblewrap || log "bubblewrap install failed (see /tmp/sandbox-services-apt.log)"
fi
if command -v bwrap >/dev/null 2>&1; then
  if bwrap --unshare-all --die-with-parent --ro-bind / / --proc /proc --dev /dev true 2>/tmp/sandbox-services-bwrap.err; then
    log "bwrap works"
  else
    log "bwrap installed but a probe failed: $(head -c 300 /tmp/sandbox-services-bwrap.err)"
  fi
fi

# --- aggregate limits: the seccomp filter (`factory sandbox status` compiles it and reports cgroups) ---
if ! /usr/bin/python3 -c "import seccomp" >/dev/null 2>&1; then
  log "installing python3-seccomp (compiles the sandbox's syscall filter)"
  apt_install python3-seccomp || log "python3-seccomp install failed: sandboxes will run without a syscall filter"
fi

if [ "${1:-}" = "bwrap" ]; then
  finish
fi

# --- docker ---------------------------------------------------------------------------
# dockerd comes from docker.io; a docker CLI may already exist without a daemon.
if ! command -v dockerd >/dev/null 2>&1; then
  log "installing docker.io"
  apt_install docker.io || log "docker.io install failed (see /tmp/sandbox-services-apt.log)"
fi
# the docker python SDK is needed by the backend and the image builder
if ! "$PY" -c "import docker" >/dev/null 2>&1; then
  log "installing the docker python SDK"
  "$PY" -m pip install -q "docker>=7.0" >/dev/null 2>&1 || log "pip install docker failed"
fi

docker_ok=0
if command -v docker >/dev/null 2>&1 && timeout 10 docker info >/dev/null 2>&1; then
  docker_ok=1
elif command -v dockerd >/dev/null 2>&1; then
  log "starting dockerd (log: /tmp/dockerd.log)"
  # No iptables/bridge: this machine class has no usable netfilter for docker and the
  # sandbox runs containers with network_mode=none anyway.
  nohup $SUDO dockerd --iptables=false --ip6tables=false --bridge=none \
    >/tmp/dockerd.log 2>&1 </dev/null &
  for _ in $(seq 1 60); do
    if timeout 5 docker info >/dev/null 2>&1; then docker_ok=1; break; fi
    sleep 1
  done
  if [ "$docker_ok" = 0 ]; then
    log "dockerd did not answer within 60 s; docker sandbox tests will skip. Last log lines:"
    tail -n 15 /tmp/dockerd.log 2>/dev/null | sed 's/^/    /'
  fi
else
  log "no dockerd available; docker sandbox tests will skip"
fi

if [ "$docker_ok" = 1 ]; then
  log "docker answers"
  factory sandbox build-image --if-missing --tag "$IMAGE" || log "image build failed; docker sandbox tests will skip"
fi
finish
