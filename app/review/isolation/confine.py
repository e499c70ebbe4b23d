"""What of the host's filesystem a child sees: only its own directory and the read-only files it
needs to run, at the strongest level the kernel allows (``Confinement``).

- ``PRIVATE_ROOT``: a mount namespace (inside a user namespace, so the same code serves root and
  other users) whose root is an empty, read-only tmpfs holding bind mounts of the system's
  programs and libraries, this Python, the packages it imported, the tools' directories (read
  only, recursively, nosuid) and the child's own directory (writable). The old root is detached,
  and a second user and mount namespace locks those mounts: nothing that runs later can remount
  them writable, unmount one to see under it, or reach the host's tree again.
- ``LANDLOCK``: the host's tree, but the kernel refuses to open anything outside the same paths.
- ``NONE``: the host's tree, as the bot's user sees it (the kernel allows neither).

The paths are chosen by the serving process (``readable_paths``): a checkout the bot runs from is
never one of them, only the packages imported from it, so its ``.env``, database and key stay out.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import platform
import struct
import sys
from collections.abc import Iterable, Iterator, Sequence

from .limits import Confinement

__all__ = ["confine", "import_path_within", "readable_paths", "unshare"]

SYSTEM_PATHS = ("/usr", "/bin", "/sbin", "/lib", "/lib64", "/lib32", "/libx32", "/etc/ld.so.cache")
DEVICES = ("/dev/null", "/dev/zero", "/dev/random", "/dev/urandom")

CLONE_NEWNS = 0x00020000  # <linux/sched.h>
CLONE_NEWUSER = 0x10000000
MS_NOSUID, MS_NODEV, MS_BIND, MS_REC, MS_PRIVATE = 0x2, 0x4, 0x1000, 0x4000, 0x40000
MNT_DETACH = 0x2
AT_FDCWD, AT_RECURSIVE = -100, 0x8000
MOUNT_ATTR_RDONLY, MOUNT_ATTR_NOSUID, MOUNT_ATTR_NODEV = 0x1, 0x2, 0x4
PR_SET_NO_NEW_PRIVS = 38
# Syscalls glibc has no wrapper for. Those numbered from 424 on are the same on every architecture.
MOUNT_SETATTR, LANDLOCK_CREATE_RULESET, LANDLOCK_ADD_RULE, LANDLOCK_RESTRICT_SELF = 442, 444, 445, 446
PIVOT_ROOT = {"x86_64": 155, "aarch64": 41}
LANDLOCK_CREATE_RULESET_VERSION = 1
LANDLOCK_RULE_PATH_BENEATH = 1
# <linux/landlock.h> filesystem rights, in ABI order; a file takes only the first three and the
# ones marked below (TRUNCATE, IOCTL_DEV).
_EXECUTE, _WRITE_FILE, _READ_FILE, _READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
_TRUNCATE, _IOCTL_DEV = 1 << 14, 1 << 15
_RIGHTS_BY_ABI = {1: (1 << 13) - 1, 2: (1 << 14) - 1, 3: (1 << 15) - 1, 4: (1 << 15) - 1}
_ALL_RIGHTS = (1 << 16) - 1  # ABI 5 and later


def _covered(path: str, roots: Iterable[str]) -> bool:
    return any(path == root or path.startswith(root.rstrip("/") + "/") for root in roots)


def readable_paths(extra: Sequence[str | os.PathLike[str]] = ()) -> tuple[str, ...]:
    """What a child needs to read, from the serving process's point of view: the system's
    programs and libraries, this Python's prefixes (the interpreter, its library, site-packages,
    the tools installed beside it), every top-level package imported from elsewhere (an editable
    install: the package's directory, never the checkout holding it), and ``extra``."""
    given = (sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix)
    prefixes = {*given, *map(os.path.realpath, given)}
    paths = [p for p in SYSTEM_PATHS if os.path.lexists(p)]
    paths += sorted(prefixes)
    for name, module in list(sys.modules.items()):
        if "." in name:
            continue
        # A package's directories (a namespace package has no __file__), else a module's file.
        where = list(getattr(module, "__path__", None) or [getattr(module, "__file__", None)])
        for place in where:
            if isinstance(place, str) and not _covered(os.path.realpath(place), prefixes):
                paths.append(os.path.abspath(place))
    paths += [os.path.abspath(p) for p in extra]
    return tuple(dict.fromkeys(paths))


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def unshare(flags: int) -> None:
    if hasattr(os, "unshare"):  # Python 3.12
        os.unshare(flags)
        return
    _check(_libc().unshare(flags), "unshare")


def _check(result: int, what: str) -> None:
    if result < 0:
        code = ctypes.get_errno()
        raise OSError(code, f"{what}: {os.strerror(code)}")


def _mount(source: str | None, target: str, kind: str | None, flags: int, data: str | None = None) -> None:
    encoded = [None if v is None else v.encode() for v in (source, target, kind, data)]
    _check(
        _libc().mount(encoded[0], encoded[1], encoded[2], ctypes.c_ulong(flags), encoded[3]),
        f"mount {target}",
    )


def _set(target: str, attributes: int, *, recursive: bool) -> None:
    """Set mount ``attributes`` on ``target`` (and every mount below it, with ``recursive``)."""
    attr = struct.pack("=QQQQ", attributes, 0, 0, 0)  # struct mount_attr: set, clear, propagation, userns
    buffer = ctypes.create_string_buffer(attr, len(attr))
    flags = AT_RECURSIVE if recursive else 0
    _check(
        _libc().syscall(MOUNT_SETATTR, AT_FDCWD, target.encode(), flags, buffer, ctypes.c_size_t(len(attr))),
        f"mount attributes of {target}",
    )


def _map_user(proc: int, uid: int, gid: int) -> None:
    """Map this user to itself in the user namespace just entered (``proc``: its /proc/self)."""
    for name, text in (("setgroups", "deny"), ("uid_map", f"{uid} {uid} 1"), ("gid_map", f"{gid} {gid} 1")):
        fd = os.open(name, os.O_WRONLY, dir_fd=proc)
        try:
            os.write(fd, text.encode())
        finally:
            os.close(fd)


def _bind(source: str, root: str, *, writable: bool) -> None:
    target = root + source
    if os.path.islink(source) and os.path.dirname(source) == "/":
        os.symlink(os.readlink(source), target)  # /bin -> usr/bin: the same link in the new root
        return
    if os.path.isdir(source):
        os.makedirs(target, exist_ok=True)
    else:
        os.makedirs(os.path.dirname(target), exist_ok=True)
        with open(target, "a"):
            pass
    _mount(source, target, None, MS_BIND | MS_REC)
    if writable:
        _set(target, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV, recursive=True)
    elif source in DEVICES:
        _set(target, MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID, recursive=False)
    else:
        _set(target, MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV, recursive=True)


def _outermost(paths: Iterable[str]) -> list[str]:
    """Existing paths, without those inside another one (bound with it)."""
    kept: list[str] = []
    for path in sorted({p for p in paths if os.path.lexists(p)}, key=lambda p: (p.count("/"), p)):
        if not _covered(path, [k for k in kept if not os.path.islink(k)]):
            kept.append(path)
    return kept


def private_root(home: str, root: str, readable: Sequence[str]) -> None:
    """Make ``root`` (an empty directory) this process's ``/``, holding ``readable`` (read only)
    and ``home`` (writable); then lock it (see the module's docstring). Raises OSError."""
    pivot = PIVOT_ROOT.get(platform.machine())
    if pivot is None:
        raise OSError(0, f"pivot_root's number on {platform.machine()} is not known here")
    uid, gid = os.getuid(), os.getgid()
    proc = os.open("/proc/self", os.O_RDONLY | os.O_DIRECTORY)
    try:
        unshare(CLONE_NEWUSER | CLONE_NEWNS)
        _map_user(proc, uid, gid)
        _mount(None, "/", None, MS_REC | MS_PRIVATE)  # nothing done here reaches the host
        _mount("revbot-root", root, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=1m")
        for path in _outermost([*readable, *DEVICES]):
            _bind(path, root, writable=False)
        _bind(home, root, writable=True)
        os.chdir(root)
        _check(_libc().syscall(pivot, b".", b"."), "pivot_root")
        _check(_libc().umount2(b".", MNT_DETACH), "detaching the old root")
        os.chdir("/")
        _set("/", MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV, recursive=False)
        # A namespace of less privilege: every mount above is locked as it is.
        unshare(CLONE_NEWUSER | CLONE_NEWNS)
        _map_user(proc, uid, gid)
    finally:
        os.close(proc)  # the host's /proc: gone before anything else runs
    os.chdir(home)


def _landlock_abi(libc: ctypes.CDLL) -> int:
    abi = int(
        libc.syscall(LANDLOCK_CREATE_RULESET, None, ctypes.c_size_t(0), LANDLOCK_CREATE_RULESET_VERSION)
    )
    _check(abi, "Landlock")
    return abi


def landlock(home: str, readable: Sequence[str]) -> None:
    """Let this process (and what it starts) open only ``readable`` (read, execute) and ``home``
    (anything), through the Landlock LSM. Raises OSError where it is not available."""
    libc = _libc()
    handled = _RIGHTS_BY_ABI.get(_landlock_abi(libc), _ALL_RIGHTS)
    attr = struct.pack("=Q", handled)  # struct landlock_ruleset_attr, its first member only
    ruleset = int(libc.syscall(LANDLOCK_CREATE_RULESET, attr, ctypes.c_size_t(len(attr)), 0))
    _check(ruleset, "a Landlock ruleset")
    try:
        file_rights = handled & (_EXECUTE | _WRITE_FILE | _READ_FILE | _TRUNCATE | _IOCTL_DEV)
        rules: list[tuple[str, int]] = [(p, _EXECUTE | _READ_FILE | _READ_DIR) for p in readable]
        rules += [(d, _READ_FILE | _WRITE_FILE) for d in DEVICES] + [(home, handled)]
        for path, rights in rules:
            with _opened(path) as fd:
                if fd is None:
                    continue
                allowed = rights & (handled if os.path.isdir(path) else file_rights)
                beneath = struct.pack("=Qi", allowed, fd)  # struct landlock_path_beneath_attr (packed)
                _check(
                    int(libc.syscall(LANDLOCK_ADD_RULE, ruleset, LANDLOCK_RULE_PATH_BENEATH, beneath, 0)),
                    path,
                )
        _check(int(libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)), "no_new_privs")
        _check(int(libc.syscall(LANDLOCK_RESTRICT_SELF, ruleset, 0)), "Landlock")
    finally:
        os.close(ruleset)


def import_path_within(links: str, readable: Sequence[str], import_path: Sequence[str]) -> list[str]:
    """``import_path`` where each entry outside ``readable`` (a checkout the packages were
    imported from) is replaced by a directory in ``links`` of links to the readable packages it
    holds: the import system lists the entries of its path, and a right to list a directory
    covers everything under it in Landlock, a checkout's ``.git`` and ``.env`` included."""
    out: list[str] = []
    for index, entry in enumerate(import_path):
        if not entry or _covered(os.path.realpath(entry), readable) or not os.path.isdir(entry):
            out.append(entry)
            continue
        inside = [r for r in readable if os.path.dirname(r) == entry.rstrip("/")]
        if not inside:
            continue  # nothing of it may be read: an entry that cannot be listed finds nothing
        directory = os.path.join(links, str(index))
        os.makedirs(directory, exist_ok=True)
        for target in inside:
            link = os.path.join(directory, os.path.basename(target))
            if not os.path.lexists(link):
                os.symlink(target, link)
        out.append(directory)
    return out


@contextlib.contextmanager
def _opened(path: str) -> Iterator[int | None]:
    try:
        fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    except OSError:
        yield None
        return
    try:
        yield fd
    finally:
        os.close(fd)


def confine(home: str, root: str, readable: Sequence[str], strongest: Confinement) -> tuple[Confinement, str]:
    """Apply the strongest confinement up to ``strongest`` the kernel allows; which one, and why
    not the ones above it."""
    if not sys.platform.startswith("linux"):
        return Confinement.NONE, "this platform has neither mount namespaces nor Landlock"
    refused: list[str] = []
    if strongest is Confinement.PRIVATE_ROOT:
        try:
            private_root(home, root, readable)
            return Confinement.PRIVATE_ROOT, ""
        except OSError as exc:
            refused.append(f"no private root ({exc.strerror or exc})")
    if strongest in (Confinement.PRIVATE_ROOT, Confinement.LANDLOCK):
        try:
            # The links go in ``root`` (unused at this level): read only, and no job clears it.
            import_path = import_path_within(root, readable, sys.path)
            landlock(home, [*readable, root])
            sys.path[:] = import_path
            return Confinement.LANDLOCK, "; ".join(refused)
        except OSError as exc:
            refused.append(f"no Landlock ({exc.strerror or exc})")
    return Confinement.NONE, "; ".join(refused)
