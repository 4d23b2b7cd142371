#!/usr/bin/env bash
# Fabric memory is owner-only: the fabric directory is 0700, its files 0600, and another
# (non-root) user can neither list the directory nor open the fabric or any object in it.
set -euo pipefail
tool=$1
fabric=permissions-$$
dir=/dev/shm/softnic-$(id -u)-$fabric
trap '"$tool" fabric rm --fabric "$fabric" >/dev/null 2>&1 || true' EXIT

"$tool" fabric create --fabric "$fabric" >/dev/null
[[ $(stat -c %a "$dir") == 700 ]] || { echo "fabric directory mode $(stat -c %a "$dir"), expected 700"; exit 1; }
[[ $(stat -c %a "$dir/fabric") == 600 ]] || { echo "fabric file mode $(stat -c %a "$dir/fabric"), expected 600"; exit 1; }

if ((EUID != 0)); then
  echo "not root: cannot switch to a second user; skipping the cross-user check"
  exit 77
fi
as_nobody=(setpriv --reuid=65534 --regid=65534 --clear-groups)
if "${as_nobody[@]}" ls "$dir" >/dev/null 2>&1; then echo "user 65534 could list $dir"; exit 1; fi
if "${as_nobody[@]}" cat "$dir/fabric" >/dev/null 2>&1; then echo "user 65534 could read $dir/fabric"; exit 1; fi
if "${as_nobody[@]}" dd of="$dir/fabric" count=0 2>/dev/null; then echo "user 65534 could open $dir/fabric for writing"; exit 1; fi
echo "fabric $fabric: owner-only (0700 directory, 0600 file); user 65534 denied"
