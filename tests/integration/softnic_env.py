"""Where the integration tests find softnic and the programs beside it.

tests/integration/CMakeLists.txt sets the variables; the defaults serve a ./build tree:
  SOFTNIC_LIBRARY_DIR  softnic's libibverbs.so.1 and librdmacm.so.1
  SOFTNIC_CLI          the softnic command (fabric create/rm, run, counters)
  PERFTEST_DIR         where ib_write_bw etc. live
  SOFTNIC_TEST_LINKS   comma list of link layers to test (default ib,roce)
  RDMALAB_PEERS_DIR    benchmarks/peers (pairrun.py, mpi_runs.py), put on sys.path
"""

import os
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
LIB_DIR = Path(os.environ.get("SOFTNIC_LIBRARY_DIR", REPO / "build/lib/softnic"))
CLI = Path(os.environ.get("SOFTNIC_CLI", REPO / "build/bin/softnic"))
PERFTEST_DIR = Path(os.environ.get("PERFTEST_DIR", "/usr/bin"))
LINKS = [s for s in os.environ.get("SOFTNIC_TEST_LINKS", "ib,roce").split(",") if s]

for _directory in (os.environ.get("RDMALAB_PEERS_DIR", str(REPO / "benchmarks/peers")), str(Path(__file__).parent)):
    if _directory not in sys.path:
        sys.path.insert(0, _directory)


def fabric_env(fabric: str, link: str, devices: int = 2) -> dict[str, str]:
    """This process's environment with softnic's libraries first and fabric `fabric` chosen."""
    env = dict(os.environ)
    env["LD_LIBRARY_PATH"] = str(LIB_DIR) + (":" + env["LD_LIBRARY_PATH"] if env.get("LD_LIBRARY_PATH") else "")
    env["SOFTNIC_FABRIC"] = fabric
    env["SOFTNIC_LINK"] = link
    env["SOFTNIC_DEVICES"] = str(devices)
    return env
