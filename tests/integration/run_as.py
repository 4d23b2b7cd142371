"""Who the `softnic run --device-nodes/--netdevs` tests run their programs as.

"root" (only when the tests themselves run as root) makes the namespaces directly; "user",
a normal user, gets them inside a user namespace of its own. Run as root, the tests reach a
normal user through setpriv (uid and gid 65534, no supplementary groups); run as anyone
else, they are that user already.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Sequence

NORMAL_UID = 65534
USERS = ["root", "user"] if os.geteuid() == 0 else ["user"]
_SETPRIV = ["setpriv", f"--reuid={NORMAL_UID}", f"--regid={NORMAL_UID}", "--clear-groups"]


def argv(user: str, command: Sequence[str]) -> list[str]:
    """`command` as run by `user`."""
    return _SETPRIV + list(command) if user == "user" and os.geteuid() == 0 else list(command)


def _sysctl(name: str) -> str | None:
    path = Path("/proc/sys") / name.replace(".", "/")
    return path.read_text().strip() if path.exists() else None


def unavailable(user: str, paths: Sequence[str | os.PathLike]) -> str | None:
    """Why `user` cannot run these tests here (a reason to skip), or None."""
    if user == "root":
        return None
    probe = subprocess.run(argv(user, ["unshare", "--user", "true"]), capture_output=True, text=True, timeout=30)
    if probe.returncode != 0:
        sysctls = {name: _sysctl(name) for name in ("kernel.unprivileged_userns_clone", "user.max_user_namespaces")}
        return f"user {NORMAL_UID} may not make a user namespace here ({probe.stderr.strip()}; sysctls: {sysctls})"
    check = argv(user, ["sh", "-c", 'for p; do [ -r "$p" ] || exit 1; done', "sh", *map(str, paths)])
    if subprocess.run(check, capture_output=True, timeout=30).returncode != 0:
        return f"user {NORMAL_UID} cannot read {', '.join(map(str, paths))} (the build tree's directories)"
    return None
