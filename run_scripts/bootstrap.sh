#!/usr/bin/env bash
# usage: run_scripts/bootstrap.sh [--test]
# Installs what this project needs on a fresh Debian 12 machine, and nothing twice.
#   bootstrap.sh          the run profile: what building and training need (demo.sh, run_and_time.sh,
#                         a cluster's nodes)
#   bootstrap.sh --test   the test profile: the run profile plus what only the tests and the peer
#                         benchmarks use (test.sh)
#   1. Debian packages, only the missing ones, via apt-get. Run: compiler tools, ccache, OpenMPI,
#      nlohmann/json, spdlog, GoogleTest and Google Benchmark (the configure step looks for them),
#      libjpeg-turbo, libpng, OpenSSL's libcrypto. Test adds Slurm and munge (Slurm clusters
#      in the e2e tests; a cluster's own Slurm is never touched by the run profile), iproute2
#      (hosts as network namespaces) and Chromium (the report page's browser test).
#   2. the project-local Python environment .venv/ with the pinned run_scripts/requirements.txt
#      (torch provides the LibTorch C++ distribution the build links against; mlperf-logging the
#      official checker), plus requirements-test.txt for the test profile (the reference scorers, TensorBoard).
# Quick when already done: stamps in .venv record the hash of the requirements each profile holds.
#
# Environment:
#   MRCNN_VENV   where the environment lives (default: <repo>/.venv)
#   MRCNN_SKIP_APT=1   do not touch Debian packages (e.g. no root; install them yourself)
#   MRCNN_TORCH=volta  LibTorch for V100 GPUs (sm_70): run_scripts/requirements-volta.txt's torch
#                      and torchvision (CUDA 12) instead of the default CUDA 13 ones
set -euo pipefail
# -h or --help: the header above, before any work.
for _a in "$@"; do [[ $_a == -h || $_a == --help ]] && { sed -n '2,/^[^#]/s/^# \{0,1\}//p' "${BASH_SOURCE[0]}"; exit 0; }; done

profile=run
case "${1:-}" in
  "") ;;
  --test) profile=test ;;
  *) echo "bootstrap: unknown argument '$1' (usage: bootstrap.sh [--test])" >&2; exit 2 ;;
esac

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="${MRCNN_VENV:-$repo/.venv}"
req="$repo/run_scripts/requirements.txt"
torch_profile="${MRCNN_TORCH:-default}"
case "$torch_profile" in
  default) ;;
  volta)
    # requirements.txt without its torch/torchvision lines, plus the Volta pins.
    merged="$(mktemp)"
    trap 'rm -f "$merged"' EXIT
    grep -Ev '^(torch|torchvision)==' "$req" >"$merged"
    grep -Ev '^#' "$repo/run_scripts/requirements-volta.txt" >>"$merged"
    req="$merged"
    ;;
  *) echo "bootstrap: MRCNN_TORCH must be 'default' or 'volta', got '$torch_profile'" >&2; exit 2 ;;
esac

say() { printf '[bootstrap] %s\n' "$*" >&2; }

# ---- 1. Debian packages ---------------------------------------------------------------------
debs=(
  build-essential cmake ninja-build ccache pkg-config git
  libopenmpi-dev openmpi-bin
  nlohmann-json3-dev libspdlog-dev libfmt-dev
  libgtest-dev libgmock-dev googletest libbenchmark-dev
  libjpeg62-turbo-dev libturbojpeg0-dev libpng-dev zlib1g-dev
  libssl-dev   # libcrypto: the SHA-256 of the run fingerprint (logging/sha256.cpp)
  python3-venv
)
if [[ $profile == test ]]; then
  debs+=(
    slurm-wlm munge   # tests/e2e/test_train_cluster.py starts a one-node Slurm cluster
    iproute2          # tests/e2e/netns_cluster.py: hosts as network namespaces, ip and tc
    chromium          # tests/report_page.py looks at the report page in a headless browser
  )
fi
if [[ "${MRCNN_SKIP_APT:-0}" != 1 ]]; then
  missing=()
  for p in "${debs[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
  done
  # python3-venv is only needed when the python3 on PATH is Debian's own.
  if [[ " ${missing[*]} " == *" python3-venv "* ]] && python3 -c 'import venv, ensurepip' 2>/dev/null; then
    missing=("${missing[@]/python3-venv}")
    read -r -a missing <<<"${missing[*]}"
  fi
  if ((${#missing[@]})); then
    say "installing Debian packages: ${missing[*]}"
    sudo=""; [[ $(id -u) -ne 0 ]] && sudo="sudo"
    export DEBIAN_FRONTEND=noninteractive
    t0=$(date +%s)
    $sudo apt-get update -qq
    # One line a package downloaded and a package set up: progress without apt's full output.
    # Its errors still show; debconf's "delaying package configuration, since apt-utils is not
    # installed" (nothing to act on: the packages are configured all the same) does not.
    $sudo apt-get install -y -q --no-install-recommends "${missing[@]}" \
        2> >(grep -v '^debconf: delaying package configuration' >&2) |
      awk '/^(Get:|Setting up )/ { print "[bootstrap]   " $0 > "/dev/stderr"; fflush("/dev/stderr") }'
    say "Debian packages installed in $(( $(date +%s) - t0 )) s"
  fi
fi

# ---- 2. Python environment ------------------------------------------------------------------
# One stamp a profile: the hash of the requirement files it installed. The test profile holds the
# run profile's packages, so after `--test` a plain bootstrap has nothing to do.
reqs=("$req")
[[ $profile == test ]] && reqs+=("$repo/run_scripts/requirements-test.txt")
want="$(cat "${reqs[@]}" | sha256sum | cut -d' ' -f1)"
run_want="$(sha256sum <"$req" | cut -d' ' -f1)"
stamp="$venv/.mrcnn-$profile.sha256"
if [[ -f "$stamp" && "$(cat "$stamp")" == "$want" && -x "$venv/bin/python" ]]; then
  say "python environment up to date ($venv, $profile profile)"
else
  fresh=0; [[ -x "$venv/bin/python" ]] || fresh=1
  if ((fresh)); then
    say "creating python environment in $venv (torch + CUDA wheels: about 3 GB to download the first time)"
  else
    say "updating python environment in $venv ($profile profile)"
  fi
  t0=$(date +%s)
  if ((fresh)); then
    python3 -m venv "$venv"
    "$venv/bin/python" -m pip install -q --upgrade pip
  fi
  args=(); for r in "${reqs[@]}"; do args+=(-r "$r"); done
  if [[ -t 2 ]]; then  # a terminal: pip's own progress bars
    "$venv/bin/python" -m pip install "${args[@]}" 1>&2
  else                 # a log: one line a package collected, downloaded (with its size) and installed
    "$venv/bin/python" -m pip install --progress-bar off "${args[@]}" |
      awk '/^(Collecting|Downloading|  Downloading|Installing|Successfully)/ { sub(/^ +/, ""); print "[bootstrap]   " $0 > "/dev/stderr"; fflush("/dev/stderr") }'
  fi
  echo "$want" >"$stamp"
  echo "$run_want" >"$venv/.mrcnn-run.sha256"
  rm -f "$venv/.mrcnn-requirements.sha256"   # the single stamp of earlier versions
  say "python environment ($profile profile) installed in $(( $(date +%s) - t0 )) s"
fi

if [[ "$torch_profile" == volta ]] &&
   ! "$venv/bin/python" -c 'import sys, torch; sys.exit("sm_70" not in torch._C._cuda_getArchFlags().split())'; then
  say "error: the installed torch carries no sm_70 code ($("$venv/bin/python" -c 'import torch; print(torch._C._cuda_getArchFlags())'))"
  exit 1
fi

# Tell the caller where LibTorch's CMake config lives (CMake also finds it on its own). Found
# without importing torch, which alone takes seconds.
read -r torch_version torch_prefix < <("$venv/bin/python" -c '
import importlib.util as u, os, re
d = u.find_spec("torch").submodule_search_locations[0]
v = re.search(r"__version__ *(?:: *str *)?= *[\x27\x22]([^\x27\x22]+)", open(os.path.join(d, "version.py")).read())
print(v.group(1) if v else "?", os.path.join(d, "share", "cmake"))')
echo "$torch_prefix" >"$venv/.torch-cmake-prefix"
say "ready: LibTorch $torch_version at $torch_prefix"
