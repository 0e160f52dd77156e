"""Kernel files named by their path: where a path ends and a ``:variant`` begins, what a path
that is no regular file is, and reading a file without ever waiting on it.

A registry key is ``stem:variant``, and a path may carry one too (``my.cu:variant``); but a
file name may hold a colon itself, so a name that exists on disk is a path first.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

KERNEL_SUFFIXES = (".cu", ".ptx")


def split_variant(pattern: str) -> tuple[str, str]:
    """``pattern`` as (path, variant): the whole of it where something by that name exists
    (``col:on.cu``), else the part before its last colon where that exists (``col:on.cu:v``),
    else the part before its first colon (``my.cu:v``, or a registry key ``stem:v``)."""
    if os.path.lexists(pattern):
        return pattern, ""
    head, colon, variant = pattern.rpartition(":")
    if colon and head and os.path.lexists(head):
        return head, variant
    text, _, variant = pattern.partition(":")
    return text, variant


def real_path(path: Path) -> tuple[Path, str]:
    """Where ``path`` really is, following links, and "" or why it cannot be followed (a link
    that points at itself, or at nothing)."""
    try:
        real = path.resolve(strict=True)
    except RuntimeError:  # Python before 3.13 raises this for a loop, 3.13 an OSError (ELOOP)
        return path, f"{path} is a symbolic link that leads back to itself (a loop): remove it"
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return path, f"{path} is a symbolic link that leads back to itself (a loop): remove it"
        if path.is_symlink():
            return path, (f"{path} is a symbolic link to {os.readlink(path)}, which does not "
                          "exist: remove the link or restore its target")
        return path, f"{path} cannot be read: {exc.strerror}"
    return real, ""


_NOT_REGULAR = ((stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISSOCK, "a socket"),
                (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"))


def not_regular(mode: int) -> str:
    """What a file of ``mode`` (st_mode) is when it is neither a regular file nor a folder
    ("" for those): the harness reads kernels and headers only from regular files."""
    return next((what for test, what in _NOT_REGULAR if test(mode)), "" if (
        stat.S_ISREG(mode) or stat.S_ISDIR(mode)) else "not a regular file")


def kernel_file_problem(text: str) -> str:
    """Why the path ``text`` is no kernel file to read ("" where it is a regular file): it
    does not exist, is a folder, a link that cannot be followed, a FIFO or a device."""
    path = Path(text)
    if not os.path.lexists(path):
        return (f"no kernel file {text}: expected the path of a .cu or .ptx file, or a registry "
                "key (see `harness list`)")
    _, problem = real_path(path)
    if problem:
        return f"kernel path {problem}"
    try:
        mode = path.stat().st_mode
    except OSError as exc:
        return f"kernel path {text} cannot be read: {exc.strerror}"
    if stat.S_ISDIR(mode):
        inside = sorted(p.name for p in path.iterdir() if p.suffix in KERNEL_SUFFIXES)[:4]
        some = f" (it holds {', '.join(inside)})" if inside else ""
        return (f"kernel path {text} is a directory: name a .cu or .ptx file in it{some}, or "
                f"pass the folder with --kernel-dir {text}")
    what = not_regular(mode)
    if what:
        return (f"kernel path {text} is {what}, not a regular file: save the kernel as a .cu "
                "or .ptx file and name that")
    return ""


def read_regular(path: Path) -> bytes:
    """The bytes of the regular file at ``path``. The file is opened without blocking and
    checked before it is read: a FIFO would otherwise wait for a writer forever. OSError
    (errno EINVAL, with what the file is) for anything that is not a regular file."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            what = not_regular(mode) or "a directory"
            raise OSError(errno.EINVAL, f"it is {what}, not a regular file", str(path))
        chunks = []
        while chunk := os.read(fd, 1 << 20):
            chunks.append(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)
