#!/usr/bin/env bash
# Install everything sgdlab needs on Debian 12 (idempotent; run as root).
#
#   setup.sh          the CPU build's packages
#   setup.sh --cuda   also make sure a CUDA toolkit is there for device: cuda
#                     (docs/cuda.md): the one in /usr/local/cuda (or an nvcc
#                     on PATH) when present, else Debian's nvidia-cuda-toolkit
#                     (CUDA 11.8, in the non-free component, enabled here).
#                     Debian packages no NCCL: algorithm nccl then stays off.
#
# YAML library: libyaml (libyaml-dev). It is the reference C implementation,
# ships in every Debian release, and its event/node API reports line and
# column for every node -- which is all the experiment-file parser needs to
# print `file:line:col: key: problem`. libfyaml is richer but is younger and
# adds nothing we use; libcyaml needs a schema per struct, which duplicates
# the one settings table the harness already keeps.
set -euo pipefail

cuda=0
for arg in "$@"; do
  case "$arg" in
    --cuda) cuda=1 ;;
    -h|--help) sed -n '2,10p' "$0"; exit 0 ;;
    *) echo "setup.sh: unknown option '$arg' (--cuda)" >&2; exit 2 ;;
  esac
done

pkgs=(build-essential cmake pkg-config
      libzmq3-dev
      libopenmpi-dev openmpi-bin
      libsqlite3-dev sqlite3
      gnuplot-nox
      libopenblas-dev
      zlib1g-dev
      libyaml-dev
      dataset-fashion-mnist
      procps
      iproute2 nftables   # sgdlab cluster: ip, tc (namespaces, tbf) and nft (--loss)
      libsimgrid-dev      # simulate: (SimGrid SMPI: smpicc, smpirun; sgdlab-rank-smpi)
      slurm-wlm munge     # cluster up --slurm: slurmctld, slurmd, srun, sbatch; munged
      openssh-server      # cluster up --ssh and hosts: over ssh
      chromium)           # test_results_e2e opens index.html headless (~80 MB download)

missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if [ "${#missing[@]}" -gt 0 ]; then
  if [ "$(id -u)" -ne 0 ]; then
    echo "setup.sh: missing packages: ${missing[*]}; run as root" >&2
    exit 1
  fi
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  # the packages' own services (munge, slurmctld, slurmd, ssh) must not
  # start: the tests start daemons of their own, with their own files
  own_policy=0
  if [ ! -e /usr/sbin/policy-rc.d ]; then
    printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d
    chmod 755 /usr/sbin/policy-rc.d
    own_policy=1
  fi
  apt-get install -y -qq --no-install-recommends "${missing[@]}"
  if [ "$own_policy" = 1 ]; then rm -f /usr/sbin/policy-rc.d; fi
fi
echo "setup.sh: all dependencies present"

# Debian 12's non-free component, for nvidia-cuda-toolkit: add it to the
# suites that already list main (deb822 sources, or sources.list lines).
enable_non_free() {
  local f=/etc/apt/sources.list.d/debian.sources
  if [ -f "$f" ]; then
    sed -i '/^Components:/{/non-free\( \|$\)/!s/$/ non-free/}' "$f"
  fi
  if [ -f /etc/apt/sources.list ]; then
    sed -i '/^deb .* main/{/ non-free\( \|$\)/!s/$/ non-free/}' /etc/apt/sources.list
  fi
}

if [ "$cuda" = 1 ]; then
  if [ -x /usr/local/cuda/bin/nvcc ]; then
    echo "setup.sh: CUDA toolkit: /usr/local/cuda ($(/usr/local/cuda/bin/nvcc --version | tail -1))"
  elif command -v nvcc >/dev/null 2>&1; then
    echo "setup.sh: CUDA toolkit: $(command -v nvcc) ($(nvcc --version | tail -1))"
  else
    if [ "$(id -u)" -ne 0 ]; then
      echo "setup.sh: --cuda: no CUDA toolkit found; run as root to install Debian's nvidia-cuda-toolkit" >&2
      exit 1
    fi
    enable_non_free
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends nvidia-cuda-toolkit
    echo "setup.sh: CUDA toolkit: $(command -v nvcc) (Debian nvidia-cuda-toolkit; no NCCL)"
  fi
fi
