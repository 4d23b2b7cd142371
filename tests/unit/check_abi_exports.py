#!/usr/bin/python3
"""Checks that softnic's libibverbs.so.1 (and librdmacm.so.1) is a drop-in for Debian's.

  exports   the dynamic symbols softnic defines (name, version, default or not, type)
            are exactly those of the reference library: a missing one stops some
            binary from loading, an extra one means a typo in abi/libibverbs.map.
  resolve   Debian-built binaries (which also load libmlx5, libefa, librdmacm) resolve
            every reference against softnic's library with LD_BIND_NOW, and start:
            the providers' load-time constructors call into the library.

Exit status: 0 pass, 1 fail, 77 skipped (a binary to check is not installed).
"""
import argparse
import os
import re
import shutil
import subprocess
import sys

SKIPPED = 77
# Sanity anchors: a reference set without these means the readelf output was not parsed,
# and comparing two empty sets would pass vacuously.
REFERENCE_ANCHORS = {
    "libibverbs.so.1": {"FUNC ibv_get_device_list@@IBVERBS_1.1", "FUNC ibv_get_device_list@IBVERBS_1.0"},
    "librdmacm.so.1": {"FUNC rdma_create_id@@RDMACM_1.0", "FUNC rdma_init_qp_attr@@RDMACM_1.2"},
}
SOFTNIC_LIBRARIES = tuple(REFERENCE_ANCHORS)
START_TIMEOUT_S = 10
LOADER_ERRORS = re.compile(r"undefined symbol|symbol lookup error|version `[^']*' not found|"
                           r"error while loading shared libraries|=> not found")
RUN_ERRORS = re.compile(LOADER_ERRORS.pattern + r"|Sanitizer")


def defined_dynamic_symbols(library):
    """{'FUNC name@@VERSION', 'OBJECT name@VERSION', ...} of the global definitions."""
    run = subprocess.run(["readelf", "--dyn-syms", "--wide", library], capture_output=True, text=True)
    if run.returncode != 0:
        sys.exit(f"FAIL: cannot read the dynamic symbols of {library}: {run.stderr.strip()}")
    symbols = set()
    for line in run.stdout.splitlines():
        fields = line.split()
        # Num: Value Size Type Bind Vis Ndx Name [(version index)]
        if len(fields) < 8 or not fields[0].endswith(":") or fields[6] == "UND":
            continue
        if fields[4] in ("GLOBAL", "WEAK"):
            symbols.add(f"{fields[3]} {fields[7]}")
    return symbols


def check_exports(library, reference):
    ours = defined_dynamic_symbols(library)
    theirs = defined_dynamic_symbols(reference)
    anchors = REFERENCE_ANCHORS.get(os.path.basename(os.path.realpath(reference)).split(".so")[0] + ".so.1", set())
    if not anchors or not anchors <= theirs:
        print(f"FAIL: could not read the exports of {reference} "
              f"(expected {sorted(anchors)} among {len(theirs)} symbols; known libraries: {', '.join(SOFTNIC_LIBRARIES)})")
        return 1
    missing, extra = sorted(theirs - ours), sorted(ours - theirs)
    for symbol in missing:
        print(f"missing: {symbol}  (exported by {reference}; add it to softnic/abi)")
    for symbol in extra:
        print(f"extra:   {symbol}  (not exported by {reference}; check the version script)")
    if missing or extra:
        print(f"FAIL: {len(missing)} missing, {len(extra)} extra of {len(theirs)} reference symbols")
        return 1
    print(f"PASS: {library} exports the same {len(theirs)} versioned symbols as {reference}")
    return 0


def sanitizer_preload(library):
    """A sanitized build of the library can only load into an uninstrumented program with
    the ASan runtime preloaded (as the harness must do too); returns that environment."""
    ldd = subprocess.run(["ldd", library], capture_output=True, text=True).stdout
    asan = re.search(r"libasan\.so\S* => (\S+)", ldd)
    # The programs' own leaks at exit are not softnic's.
    return {"LD_PRELOAD": asan.group(1), "ASAN_OPTIONS": "detect_leaks=0"} if asan else {}


def check_binary(binary, library_dir):
    """Returns a list of problems with running `binary` on the library in library_dir."""
    env = dict(os.environ, LD_BIND_NOW="1", LD_LIBRARY_PATH=library_dir)
    ldd = subprocess.run(["ldd", "-r", binary], env=env, capture_output=True, text=True)
    report = ldd.stdout + ldd.stderr
    problems = [line.strip() for line in report.splitlines() if LOADER_ERRORS.search(line)]
    ours = os.path.realpath(os.path.join(library_dir, "libibverbs.so.1"))
    for name in SOFTNIC_LIBRARIES:
        loaded = re.search(re.escape(name) + r" => (\S+)", report)
        if name != "libibverbs.so.1" and not loaded:
            continue  # the program does not use it
        mine = os.path.realpath(os.path.join(library_dir, name))
        if not loaded or os.path.realpath(loaded.group(1)) != mine:
            problems.append(f"{name} resolves to {loaded.group(1) if loaded else 'nothing'}, not {mine}")
    # --help only prints usage, but loading runs every constructor (libmlx5 and libefa
    # register themselves) with all symbols bound.
    try:
        run_env = dict(env, **sanitizer_preload(ours))
        run = subprocess.run([binary, "--help"], env=run_env, capture_output=True, text=True,
                             timeout=START_TIMEOUT_S)
        if run.returncode < 0 or RUN_ERRORS.search(run.stderr):
            problems.append(f"`{binary} --help` failed to start (status {run.returncode}): "
                            f"{run.stderr.strip()[:300]}")
    except subprocess.TimeoutExpired:
        problems.append(f"`{binary} --help` did not exit within {START_TIMEOUT_S} s")
    return problems


def check_resolve(library_dir, binaries):
    failed, skipped = False, []
    for name in binaries:
        binary = shutil.which(name)
        if binary is None:
            skipped.append(name)
            continue
        problems = check_binary(binary, library_dir)
        for problem in problems:
            print(f"{name}: {problem}")
        print(f"{'FAIL' if problems else 'PASS'}: {binary}")
        failed |= bool(problems)
    if failed:
        return 1
    if skipped:
        print(f"SKIPPED: not installed: {' '.join(skipped)} (scripts/install-deps.sh installs them)")
        return SKIPPED
    return 0


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    exports = commands.add_parser("exports", help="compare exported symbol versions")
    exports.add_argument("--library", required=True, help="softnic's libibverbs.so.1 or librdmacm.so.1")
    exports.add_argument("--reference", required=True, help="the distribution's library of that name")
    resolve = commands.add_parser("resolve", help="load distribution binaries against softnic")
    resolve.add_argument("--library-dir", required=True, help="directory holding softnic's libibverbs.so.1")
    resolve.add_argument("binaries", nargs="+", help="program names, looked up on PATH")
    args = parser.parse_args()
    if args.command == "exports":
        return check_exports(args.library, args.reference)
    return check_resolve(os.path.abspath(args.library_dir), args.binaries)


if __name__ == "__main__":
    sys.exit(main())
