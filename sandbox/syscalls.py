"""The sandbox's default-deny seccomp policy: one allow-list, compiled for bwrap and rendered for Docker. Host side.

Untrusted env code needs what CPython needs to compute, read and write its work dir, use threads and start
the odd child process. Everything else - notably ``bpf``, ``perf_event_open``, ``keyctl``, ``io_uring_*``,
``mount`` and its new API, ``unshare``/``setns``, ``ptrace``, module loading, clock setting - fails with
EPERM. ``clone`` may not create namespaces; ``clone3`` (whose flags a filter cannot read) answers ENOSYS so
libc falls back to ``clone``.

bwrap takes a compiled cBPF program (``--seccomp FD``). It is built with libseccomp's Python binding, the
Debian package ``python3-seccomp`` (``scripts/sandbox-services.sh`` installs it), which belongs to the system
interpreter: so this file also runs standalone (``/usr/bin/python3 sandbox/syscalls.py --out FILE``, stdlib
and ``seccomp`` only) and the result is cached per policy and architecture. Docker gets the same list as a
seccomp profile (JSON) and compiles it itself.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import platform
import subprocess
import sys

ALLOWED = (
    "accept accept4 access alarm arch_prctl bind brk capget chdir chmod chown clock_getres clock_gettime "
    "clock_nanosleep close close_range connect copy_file_range creat dup dup2 dup3 epoll_create epoll_create1 "
    "epoll_ctl epoll_pwait epoll_pwait2 epoll_wait eventfd eventfd2 execve execveat exit exit_group faccessat "
    "faccessat2 fadvise64 fallocate fchdir fchmod fchmodat fchown fchownat fcntl fdatasync fgetxattr flistxattr "
    "flock fork fremovexattr fsetxattr fstat fstatfs fsync ftruncate futex futex_waitv getcpu getcwd getdents "
    "getdents64 getegid geteuid getgid getgroups getitimer getpeername getpgid getpgrp getpid getppid "
    "getpriority getrandom getresgid getresuid getrlimit get_robust_list getrusage getsid getsockname "
    "getsockopt gettid gettimeofday getuid getxattr inotify_add_watch inotify_init inotify_init1 "
    "inotify_rm_watch ioctl kill lchown lgetxattr link linkat listen listxattr llistxattr lremovexattr lseek "
    "lsetxattr lstat madvise membarrier memfd_create mincore mkdir mkdirat mknod mknodat mlock mlock2 mlockall "
    "mmap mprotect mremap msync munlock munlockall munmap nanosleep newfstatat open openat openat2 pause "
    "pidfd_open pidfd_send_signal pipe pipe2 poll ppoll prctl pread64 preadv preadv2 prlimit64 pselect6 "
    "pwrite64 pwritev pwritev2 read readahead readlink readlinkat readv recvfrom recvmmsg recvmsg removexattr "
    "rename renameat renameat2 restart_syscall rmdir rseq rt_sigaction rt_sigpending rt_sigprocmask "
    "rt_sigqueueinfo rt_sigreturn rt_sigsuspend rt_sigtimedwait rt_tgsigqueueinfo sched_getaffinity "
    "sched_getattr sched_getparam sched_get_priority_max sched_get_priority_min sched_getscheduler "
    "sched_rr_get_interval sched_setaffinity sched_yield seccomp select sendfile sendmmsg sendmsg sendto "
    "setfsgid setfsuid setgid setgroups setitimer setpgid setpriority setregid setresgid setresuid setreuid "
    "setrlimit set_robust_list setsid setsockopt set_tid_address setuid setxattr shutdown sigaltstack "
    "signalfd signalfd4 socket socketpair splice stat statfs statx symlink symlinkat sync sync_file_range "
    "syncfs sysinfo tee tgkill time timer_create timer_delete timer_getoverrun timer_gettime timer_settime "
    "timerfd_create timerfd_gettime timerfd_settime times tkill truncate umask uname unlink unlinkat utime "
    "utimensat utimes vfork vmsplice wait4 waitid write writev"
).split()
#: clone flags that create namespaces (NEWNS, NEWCGROUP, NEWUTS, NEWIPC, NEWUSER, NEWPID, NEWNET, NEWTIME).
CLONE_NAMESPACE_FLAGS = 0x00020000 | 0x02000000 | 0x04000000 | 0x08000000 | 0x10000000 | 0x20000000 | 0x40000000 | 0x00000080
#: Probes of the abuse suite: each must fail inside every sandbox.
FORBIDDEN_PROBES = ("bpf", "perf_event_open", "keyctl", "io_uring_setup", "mount")


def policy_digest() -> str:
    text = json.dumps([ALLOWED, CLONE_NAMESPACE_FLAGS, platform.machine()])
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def build_bpf(out_path: str) -> None:
    """Compile the policy with libseccomp (``import seccomp``) into ``out_path``."""
    import seccomp  # python3-seccomp

    flt = seccomp.SyscallFilter(defaction=seccomp.ERRNO(errno.EPERM))
    for name in ALLOWED:
        try:
            flt.add_rule(seccomp.ALLOW, name)
        except (RuntimeError, ValueError, OSError):
            continue  # not a syscall on this architecture (e.g. open on arm64)
    flt.add_rule(seccomp.ALLOW, "clone", seccomp.Arg(0, seccomp.MASKED_EQ, CLONE_NAMESPACE_FLAGS, 0))
    flt.add_rule(seccomp.ERRNO(errno.ENOSYS), "clone3")
    tmp = f"{out_path}.{os.getpid()}.tmp"
    with open(tmp, "wb") as f:
        flt.export_bpf(f)
    os.replace(tmp, out_path)


def docker_profile() -> str:
    """The same policy as a Docker seccomp profile (JSON text for ``security_opt=["seccomp=..."]``)."""
    arches = {"x86_64": ["SCMP_ARCH_X86_64"], "aarch64": ["SCMP_ARCH_AARCH64"]}.get(platform.machine(), [])
    profile = {
        "defaultAction": "SCMP_ACT_ERRNO",
        "defaultErrnoRet": errno.EPERM,
        "architectures": arches,
        "syscalls": [
            {"names": list(ALLOWED), "action": "SCMP_ACT_ALLOW"},
            {"names": ["clone"], "action": "SCMP_ACT_ALLOW",
             "args": [{"index": 0, "value": CLONE_NAMESPACE_FLAGS, "valueTwo": 0, "op": "SCMP_CMP_MASKED_EQ"}]},
            {"names": ["clone3"], "action": "SCMP_ACT_ERRNO", "errnoRet": errno.ENOSYS},
        ],
    }
    return json.dumps(profile)


_SYSTEM_PYTHONS = ("/usr/bin/python3",)


def bpf_file(cache_dir: str) -> tuple[str | None, str | None]:
    """(path of the compiled filter, None) or (None, why there is none). Built once per policy, cached."""
    path = os.path.join(cache_dir, f"seccomp-{platform.machine()}-{policy_digest()}.bpf")
    if os.path.exists(path):
        return path, None
    os.makedirs(cache_dir, exist_ok=True)
    reason = ""
    try:
        build_bpf(path)
        return path, None
    except ImportError:
        pass  # this interpreter has no binding: the system one usually has (python3-seccomp)
    except Exception as exc:  # noqa: BLE001 - a broken binding: try the system interpreter's
        reason = f"{type(exc).__name__}: {exc}"
    for python in _SYSTEM_PYTHONS:
        if not os.path.exists(python):
            continue
        try:
            r = subprocess.run([python, "-I", os.path.abspath(__file__), "--out", path], capture_output=True,
                               text=True, timeout=30, env={"PATH": "/usr/bin:/bin"})
        except (OSError, subprocess.TimeoutExpired) as exc:
            reason = f"{python}: {exc}"
            continue
        if r.returncode == 0 and os.path.exists(path):
            return path, None
        reason = r.stderr.strip().splitlines()[-1][:200] if r.stderr.strip() else f"{python} exited {r.returncode}"
    hint = "install python3-seccomp (scripts/sandbox-services.sh does)"
    return None, f"no seccomp filter: {hint}" + (f" ({reason})" if reason else "")


if __name__ == "__main__":  # bpf_file() runs this file in the system interpreter, which has python3-seccomp
    if len(sys.argv) == 3 and sys.argv[1] == "--out":
        sys.path = [p for p in sys.path if os.path.abspath(p) != os.path.dirname(os.path.abspath(__file__))]
        try:
            build_bpf(sys.argv[2])
        except ImportError:
            print("the seccomp module (python3-seccomp) is not installed for this interpreter", file=sys.stderr)
            sys.exit(3)
        sys.exit(0)
    print("usage: python sandbox/syscalls.py --out FILE   (`factory sandbox status` builds and reports the filter)",
          file=sys.stderr)
    sys.exit(2)
