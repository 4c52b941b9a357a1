#!/usr/bin/env bash
# Install everything sgdlab needs on Debian 12 (idempotent; run as root).
#
# YAML library: libyaml (libyaml-dev). It is the reference C implementation,
# ships in every Debian release, and its event/node API reports line and
# column for every node -- which is all the experiment-file parser needs to
# print `file:line:col: key: problem`. libfyaml is richer but is younger and
# adds nothing we use; libcyaml needs a schema per struct, which duplicates
# the one settings table the harness already keeps (STYLE.md 9).
set -euo pipefail

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
  apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
echo "setup.sh: all dependencies present"
