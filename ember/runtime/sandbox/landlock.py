"""L4: Landlock, our own ~100 lines of ctypes (the PyPI ``landlock`` package is a dev release).

Rules depend on the kernel's ABI: filesystem rights from ABI 1 (REFER 2, TRUNCATE 3, IOCTL_DEV 5);
TCP bind/connect handled with no rule, i.e. denied, from ABI 4; abstract Unix sockets and signals
scoped to the sandbox from ABI 6. Landlock does not cover UDP or (below ABI 9) path Unix sockets:
combine it with a net namespace or seccomp (isolation.md §2.4, pitfall 5).
"""

from __future__ import annotations

import ctypes
import dataclasses
import errno
import os
import stat

from ember.runtime.sandbox import _linux

CREATE_RULESET_VERSION = 1 << 0
RULE_PATH_BENEATH = 1

EXECUTE = 1 << 0
WRITE_FILE = 1 << 1
READ_FILE = 1 << 2
READ_DIR = 1 << 3
REMOVE_DIR = 1 << 4
REMOVE_FILE = 1 << 5
MAKE_CHAR = 1 << 6
MAKE_DIR = 1 << 7
MAKE_REG = 1 << 8
MAKE_SOCK = 1 << 9
MAKE_FIFO = 1 << 10
MAKE_BLOCK = 1 << 11
MAKE_SYM = 1 << 12
REFER = 1 << 13  # ABI 2
TRUNCATE = 1 << 14  # ABI 3
IOCTL_DEV = 1 << 15  # ABI 5
FILE_RIGHTS = EXECUTE | WRITE_FILE | READ_FILE | TRUNCATE | IOCTL_DEV

NET_BIND_TCP = 1 << 0  # ABI 4
NET_CONNECT_TCP = 1 << 1
SCOPE_ABSTRACT_UNIX_SOCKET = 1 << 0  # ABI 6
SCOPE_SIGNAL = 1 << 1

READ = READ_FILE | READ_DIR
READ_WRITE_TREE = (
    READ
    | WRITE_FILE
    | REMOVE_DIR
    | REMOVE_FILE
    | MAKE_DIR
    | MAKE_REG
    | MAKE_SYM
    | MAKE_FIFO
    | MAKE_SOCK
    | REFER
    | TRUNCATE
)


class _RulesetAttr(ctypes.Structure):
    _fields_ = [
        ("handled_access_fs", ctypes.c_uint64),
        ("handled_access_net", ctypes.c_uint64),
        ("scoped", ctypes.c_uint64),
    ]


class _PathBeneathAttr(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


def abi_version() -> int:
    """The kernel's Landlock ABI; 0 with the reason in an OSError when unavailable."""
    return _linux.syscall(
        _linux.SYS_LANDLOCK_CREATE_RULESET,
        None,
        ctypes.c_size_t(0),
        ctypes.c_uint32(CREATE_RULESET_VERSION),
        what="landlock_create_ruleset(version)",
    )


def unavailable_reason(exc: OSError) -> str:
    if exc.errno == errno.ENOSYS:
        return "kernel built without Landlock (CONFIG_SECURITY_LANDLOCK)"
    if exc.errno == errno.EOPNOTSUPP:
        return "Landlock is built in but not enabled (add 'landlock' to the lsm= boot parameter)"
    return str(exc)


def handled_fs(abi: int) -> int:
    rights = (1 << 13) - 1
    if abi >= 2:
        rights |= REFER
    if abi >= 3:
        rights |= TRUNCATE
    if abi >= 5:
        rights |= IOCTL_DEV
    return rights


@dataclasses.dataclass(frozen=True)
class Rule:
    path: str
    access: int


def create_ruleset(rules: list[Rule], abi: int) -> int:
    """A ruleset fd with ``rules`` (missing paths skipped). Build it while the paths can still
    be opened (before a uid switch); enforce it later with ``restrict_self``."""
    fs = handled_fs(abi)
    attr = _RulesetAttr(
        fs,
        NET_BIND_TCP | NET_CONNECT_TCP if abi >= 4 else 0,
        SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL if abi >= 6 else 0,
    )
    size = 8 if abi < 4 else 16 if abi < 6 else 24
    ruleset = _linux.syscall(
        _linux.SYS_LANDLOCK_CREATE_RULESET,
        ctypes.byref(attr),
        ctypes.c_size_t(size),
        ctypes.c_uint32(0),
        what="landlock_create_ruleset",
    )
    try:
        for rule in rules:
            _add_path_rule(ruleset, rule, fs)
    except BaseException:
        os.close(ruleset)
        raise
    return ruleset


def restrict_self(ruleset: int) -> None:
    """Set no_new_privs and enforce the ruleset on this thread (and its future threads)."""
    try:
        _linux.prctl(_linux.PR_SET_NO_NEW_PRIVS, 1)
        _linux.syscall(
            _linux.SYS_LANDLOCK_RESTRICT_SELF,
            ctypes.c_int(ruleset),
            ctypes.c_uint32(0),
            what="landlock_restrict_self",
        )
    finally:
        os.close(ruleset)


def restrict(rules: list[Rule], abi: int) -> None:
    restrict_self(create_ruleset(rules, abi))


def _add_path_rule(ruleset: int, rule: Rule, handled: int) -> None:
    try:
        fd = os.open(rule.path, os.O_PATH | os.O_CLOEXEC)
    except FileNotFoundError:
        return
    try:
        access = rule.access & handled
        if not stat.S_ISDIR(os.fstat(fd).st_mode):
            access &= FILE_RIGHTS
        beneath = _PathBeneathAttr(access, fd)
        _linux.syscall(
            _linux.SYS_LANDLOCK_ADD_RULE,
            ctypes.c_int(ruleset),
            ctypes.c_int(RULE_PATH_BENEATH),
            ctypes.byref(beneath),
            ctypes.c_uint32(0),
            what=f"landlock_add_rule({rule.path!r})",
        )
    finally:
        os.close(fd)


def rules_for(
    read_paths: list[str],
    temp_dir: str | None,
    *,
    proc_self: bool,
    list_root: bool,
) -> list[Rule]:
    """Read on the runtime and code, read/write on the temp dir, the four device files."""
    rules = [Rule(path, READ) for path in read_paths]
    if temp_dir:
        rules.append(Rule(temp_dir, READ_WRITE_TREE))
    rules.append(Rule("/dev/null", READ_FILE | WRITE_FILE | TRUNCATE))
    rules += [Rule(f"/dev/{name}", READ_FILE) for name in ("zero", "random", "urandom")]
    if proc_self:
        # /proc/self resolves to this process's directory; threads live beneath it.
        rules.append(Rule(os.path.realpath("/proc/self"), READ))
    if list_root:
        rules.append(Rule("/", READ_DIR))  # the private root holds nothing secret to list
    return rules
