"""Reading files this host did not write just now (registry entries, user input) without trusting them.

A registry entry or an input path can be anything by the time it is read: a folder, a FIFO that blocks a
plain ``open``, a symlink loop, an unreadable or huge file. :func:`read_regular` opens without blocking and
without following a final symlink, refuses anything but a regular file, and caps the size; every failure is
an :class:`OSError` whose errno :func:`explain` turns into one line with what to do about it.

Files the factory writes for itself go the other way through here too: :func:`write_atomic` (a summary or a
state file is the previous one or the new one, never half), and :func:`read_state` reads a state file back,
a damaged one becoming one line (:func:`state_file_message`) that callers raise as bad input.
"""

from __future__ import annotations

import errno
import json
import os
import secrets
import stat
from pathlib import Path
from typing import TypeVar

from pydantic import BaseModel, ValidationError

from schemas.errors import InputError, validation_message

M = TypeVar("M", bound=BaseModel)

MAX_FILE_BYTES = 64 * 1024 * 1024
"""No file the factory reads for itself is anywhere near this; bigger means it is not what it claims."""


class NotRegularFile(OSError):
    """The path is a folder, FIFO, socket, device or symlink where a regular file belongs."""


class FileTooLarge(OSError):
    """The file exceeds the size cap of what it is supposed to be."""


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISSOCK, "a socket"),
                       (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"), (stat.S_ISLNK, "a symbolic link")):
        if test(mode):
            return name
    return "not a regular file"


def read_regular(path: str | Path, *, dir_fd: int | None = None, limit: int = MAX_FILE_BYTES, follow: bool = False) -> bytes:
    """The bytes of a regular file. ``dir_fd`` reads ``path`` relative to an open folder (one snapshot of it).

    Never blocks (FIFOs are opened non-blocking, then refused) and, unless ``follow``, never follows a final
    symlink (a link, dangling or looping, is refused as such).
    """
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | (0 if follow else os.O_NOFOLLOW)
    try:
        fd = os.open(path, flags, dir_fd=dir_fd)
    except OSError as exc:
        if exc.errno == errno.ELOOP and not follow:
            raise NotRegularFile(errno.ELOOP, "is a symbolic link", str(path)) from None
        raise
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise NotRegularFile(errno.EINVAL, f"is {_kind(info.st_mode)}, not a file", str(path))
        if info.st_size > limit:
            raise FileTooLarge(errno.EFBIG, f"is {info.st_size:,} bytes, over the {limit:,}-byte limit", str(path))
        os.set_blocking(fd, True)
        chunks, total = [], 0
        while chunk := os.read(fd, 1 << 20):
            total += len(chunk)
            if total > limit:
                raise FileTooLarge(errno.EFBIG, f"grew past the {limit:,}-byte limit while being read", str(path))
            chunks.append(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def decode_utf8(data: bytes, path: str | Path) -> str:
    """Strict UTF-8; a bad byte becomes a ``ValueError`` that says where it is."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ValueError(f"{path} is not UTF-8 text (byte 0x{data[exc.start]:02x} at offset {exc.start})") from None


class InputFileError(ValueError):
    """A file the user named is not what it should be; the message is one line that says so."""


def read_text(path: str | Path, what: str, expected: str, limit: int = MAX_FILE_BYTES) -> str:
    """The UTF-8 text of a file the user named, or :class:`InputFileError`: ``{what}: {problem}; pass {expected}``."""
    try:
        data = read_regular(Path(path).expanduser(), limit=limit, follow=True)
    except OSError as exc:
        raise InputFileError(f"{what}: {reason(exc)}; pass {expected}") from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        where = f"byte 0x{data[exc.start]:02x} at offset {exc.start}"
        raise InputFileError(f"{what}: not UTF-8 text ({where}); pass {expected}") from None


_REASONS = {
    errno.ENOENT: "no such file or folder",
    errno.EACCES: "permission denied",
    errno.EPERM: "operation not permitted",
    errno.EROFS: "is on a read-only file system",
    errno.ENOSPC: "no space left on the device",
    errno.EDQUOT: "disk quota exceeded",
    errno.ENOTDIR: "a part of the path is a file, not a folder",
    errno.EISDIR: "is a folder, not a file",
    errno.ELOOP: "is a symbolic link loop",
    errno.ENAMETOOLONG: "the name is too long",
    errno.EIO: "input/output error from the device",
    errno.ENOTEMPTY: "the folder is not empty",
    errno.EEXIST: "already exists",
    errno.EMFILE: "too many open files in this process",
    errno.ENFILE: "too many open files on this system",
}

_FIXES = {
    errno.ENOENT: "check the path",
    errno.EACCES: "fix its permissions or choose another path",
    errno.EPERM: "fix its permissions or choose another path",
    errno.EROFS: "choose a path on a writable file system",
    errno.ENOSPC: "free some space or choose another path",
    errno.EDQUOT: "free some space or choose another path",
    errno.ENOTDIR: "remove or rename the file that stands where a folder belongs, or choose another path",
    errno.EISDIR: "pass a file, not a folder",
    errno.ELOOP: "remove the looping link",
    errno.EMFILE: "raise the open-file limit (ulimit -n)",
    errno.ENFILE: "close other programs or raise the system's open-file limit",
}


def reason(exc: OSError) -> str:
    """What went wrong, in words (no errno numbers, no Python class names)."""
    if isinstance(exc, (NotRegularFile, FileTooLarge)) and exc.strerror:
        return exc.strerror
    return _REASONS.get(exc.errno or 0) or (exc.strerror or type(exc).__name__).lower()


def explain(exc: OSError, fix: str | None = None) -> str:
    """One line: the path, what is wrong with it, and what to do (``fix`` overrides the generic advice; "" drops it)."""
    advice = fix if fix is not None else _FIXES.get(exc.errno or 0)
    if fix is None and advice is None and isinstance(exc, NotRegularFile):
        advice = "replace it with the file that belongs there"
    text = reason(exc)
    if exc.filename is not None:
        where = f"{exc.filename} -> {exc.filename2}" if exc.filename2 is not None else str(exc.filename)
        text = f"{where}: {text}"
    return f"{text}; {advice}" if advice else text


def write_atomic(path: str | Path, text: str) -> None:
    """Write ``text`` to ``path`` through a temporary file renamed into place: a reader, or a crash or full disk
    mid-write, finds the previous file or the new one whole, never half of one. OSError names ``path``."""
    path = Path(path).expanduser()
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = str(path.parent / f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o666)  # an ordinary file (umask), not mkstemp's 0600
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, path)
    except OSError as exc:
        if exc.filename is None or exc.filename == temporary:
            exc.filename = str(path)
        raise
    finally:
        if os.path.lexists(temporary):
            os.unlink(temporary)


def state_file_message(path: object, problem: BaseException, fix: str, *, line: int | None = None,
                       model: type[BaseModel] | None = None) -> str:  # fmt: skip
    """One line for a file the factory wrote for itself and cannot read back (a write cut short, a hand edit, a
    full disk): the file (and line), every problem with its location and input (the one renderer), and the fix.
    Callers raise it as bad input (exit 2): the file is the user's to remove or repair, never a bug."""
    where = f"{path} line {line}" if line is not None else str(path)
    if isinstance(problem, ValidationError):
        return f"{where} is damaged ({validation_message(problem, model, limit=3)}); {fix}"
    if isinstance(problem, UnicodeDecodeError):
        return f"{where} is damaged (not UTF-8 text: byte at offset {problem.start}); {fix}"
    if isinstance(problem, OSError):
        return f"{where} is unreadable ({reason(problem)}); {fix}"
    return f"{where} is damaged ({' '.join(str(problem).split()) or type(problem).__name__}); {fix}"


def read_state(path: str | Path, model: type[M], fix: str, error: type[Exception] | None = None) -> M:
    """A state file the factory wrote for itself (``pipeline.json``, a rollout's ``run.json``), read back as
    ``model``; a file that cannot be read or is damaged raises ``error`` (default
    :class:`schemas.errors.InputError`, exit 2) with one line: the file, each problem with its location, ``fix``."""
    try:
        return model.model_validate_json(read_regular(path, follow=True).decode("utf-8"))
    except (OSError, UnicodeDecodeError, ValidationError) as exc:
        raise (error or InputError)(state_file_message(path, exc, fix, model=model)) from None


ADAPTER_CONFIG, ADAPTER_WEIGHTS = "adapter_config.json", ("adapter_model.safetensors", "adapter_model.bin")


def adapter_problem(folder: str | Path, fix: str) -> str | None:
    """None when ``folder`` holds a whole PEFT adapter, else one line naming the file that is missing, cut short
    or damaged, and ``fix``. Read without loading anything: a safetensors file's header says how long its data
    is, so a file cut by a full disk or a kill is found here, before a model loads."""
    folder = Path(folder).expanduser()
    if not folder.is_dir():
        return f"{folder}: {'not a folder' if folder.exists() else 'no such folder'} (a PEFT adapter folder belongs there); {fix}"
    config = folder / ADAPTER_CONFIG
    try:
        if not isinstance(json.loads(read_regular(config, follow=True)), dict):
            raise ValueError("not a JSON object")
    except OSError as exc:
        return f"{config}: {reason(exc)} (the adapter's config); {fix}"
    except ValueError as exc:
        return f"{config} is damaged ({' '.join(str(exc).split())}); {fix}"
    weights = next((folder / name for name in ADAPTER_WEIGHTS if (folder / name).exists()), None)
    if weights is None:
        return f"{folder} holds no adapter weights ({' or '.join(ADAPTER_WEIGHTS)}); {fix}"
    if weights.suffix == ".safetensors":
        problem = _safetensors_problem(weights)
        if problem:
            return f"{weights} is damaged ({problem}); {fix}"
    return None


def _safetensors_problem(path: Path) -> str | None:
    """What is wrong with a safetensors file's framing (8-byte header length, JSON header, data as long as the
    header's offsets say), or None; the tensors themselves are not read."""
    try:
        size = path.stat().st_size
        with open(path, "rb") as handle:
            head = handle.read(8)
            if len(head) < 8:
                return f"{size} bytes, shorter than a safetensors header"
            length = int.from_bytes(head, "little")
            if length > size - 8 or length > MAX_FILE_BYTES:
                return f"cut short: its header alone needs {length + 8:,} bytes, the file has {size:,}"
            header = json.loads(handle.read(length))
    except OSError as exc:
        return reason(exc)
    except ValueError:
        return "its header is not JSON"
    ends = [entry["data_offsets"][1] for key, entry in header.items() if key != "__metadata__" and isinstance(entry, dict)
            and isinstance(entry.get("data_offsets"), list) and len(entry["data_offsets"]) == 2]  # fmt: skip
    need = 8 + length + max(ends, default=0)
    if size < need:
        return f"cut short: {size:,} of its {need:,} bytes"
    return None


TRAIN_RUN_FILE = "run.json"


class TrainRunFile(BaseModel):
    """A ``factory train`` run's ``run.json``: which env it trained on and its whole config (``trainer.config``)."""

    env_id: str | None = None
    config: dict[str, object]


def read_train_run(run_folder: str | Path, fix: str, error: type[Exception] | None = None) -> TrainRunFile | None:
    """The one reader of a ``factory train`` run's ``run.json`` (resume, ``factory eval --env``, the rendering an
    adapter was trained with): None when the folder has none, else the file; a damaged one raises ``error``
    (default :class:`InputError`, exit 2) naming the file and ``fix``."""
    path = Path(run_folder).expanduser() / TRAIN_RUN_FILE
    if not path.is_file():
        return None
    return read_state(path, TrainRunFile, fix, error)


TRAIN_SUMMARY_FILE = "summary.json"


class TrainSummaryFile(BaseModel):
    """A ``factory train`` run's ``summary.json`` (``trainer.report.summary``'s keys; any are kept)."""

    model_config = {"extra": "allow"}


def read_train_summary(run_folder: str | Path, fix: str, error: type[Exception] | None = None) -> dict[str, object] | None:
    """The one reader of a ``factory train`` run's ``summary.json``: None when there is none; damaged: ``error``
    (default :class:`InputError`, exit 2) naming the file and ``fix``, never an empty summary taken as real."""
    path = Path(run_folder).expanduser() / TRAIN_SUMMARY_FILE
    if not path.is_file():
        return None
    return dict(read_state(path, TrainSummaryFile, fix, error).model_extra or {})
