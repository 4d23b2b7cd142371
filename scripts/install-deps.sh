#!/usr/bin/env bash
# Installs every Debian package rdmalab needs. Idempotent and quick when all are present.
set -euo pipefail

packages=(
  # build
  build-essential cmake ninja-build pkg-config
  googletest libgtest-dev libbenchmark-dev nlohmann-json3-dev
  # system libibverbs headers (softnic builds against their struct layouts) and tools
  libibverbs-dev librdmacm-dev ibverbs-utils ibverbs-providers rdma-core rdmacm-utils
  perftest
  # tests/rdma_core: rdma-core's own provider test suite (and pyverbs, which it runs on)
  python3-pyverbs
  # peers measured side by side with softnic
  ucx-utils
  # tests/integration: third-party RDMA programs run unmodified on softnic
  qperf libfabric-bin
  # tests/integration: MPI over softnic (test_mpi.py: MPICH and Open MPI over UCX's rc_verbs,
  # test_mpi_transports.py: Open MPI's pml ucx and mtl ofi; benchmarks/peers/compare_mpi.py)
  mpich libmpich-dev openmpi-bin libopenmpi-dev
  # tests/integration: socket programs run over rsockets under librspreload (librdmacm1's)
  iperf3 sockperf
  # kv/: the TCP baselines the key-value systems are compared with (rdmalab-kv --system memcached|redis)
  memcached redis-server
  # tests: ABI checks, non-root user checks
  binutils passwd util-linux procps
  # model/: profiles and calibration data are YAML, parsed in C++
  libyaml-cpp-dev
  # python side (Debian's /usr/bin/python3 only; nothing from PyPI)
  python3 python3-yaml python3-matplotlib python3-rich python3-pytest python3-jsonschema
  # harness: netns launcher and its tests (ip netns, veth, bridge)
  iproute2
  # harness: ssh launcher (client) and its test's real sshd inside network namespaces
  openssh-client openssh-server
  # harness: slurm launcher (srun/scancel) and its test's single-node slurmctld + slurmd + munged
  slurm-client slurmctld slurmd munge
  # harness: PCIe-counter sidecar on verbs runs (pcm-pcie; Intel servers only)
  pcm
  # harness: headless screenshot test of the HTML report
  chromium
)

missing=()
for p in "${packages[@]}"; do
  status=$(dpkg-query -W -f='${db:Status-Abbrev}' "$p" 2>/dev/null || true)
  [[ "$status" == ii* ]] || missing+=("$p")
done
if ((${#missing[@]} == 0)); then
  echo "install-deps: all ${#packages[@]} packages present"
  exit 0
fi

echo "install-deps: installing ${missing[*]}"
sudo_cmd=()
if ((EUID != 0)); then
  command -v sudo >/dev/null || { echo "install-deps: need root or sudo to install: ${missing[*]}" >&2; exit 1; }
  sudo_cmd=(sudo)
fi
export DEBIAN_FRONTEND=noninteractive
"${sudo_cmd[@]}" apt-get update -qq
"${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
