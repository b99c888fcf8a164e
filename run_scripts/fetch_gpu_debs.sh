#!/usr/bin/env bash
# Downloads (does not install) the Debian packages the C++ build needs and that a GPU machine
# without internet may lack, for run_scripts/gpu_check.sh to unpack there (MRCNN_DEBS=DIR):
# nlohmann/json, spdlog + fmt, GoogleTest/GoogleMock, Google Benchmark, libjpeg-turbo, libpng,
# zlib, OpenSSL's libcrypto (the fingerprint's SHA-256), and pkg-config itself, with the runtime libraries they link. About 4 MB. Run it on Debian 12
# (bookworm), the project's platform: the names are bookworm's, and the libraries need glibc 2.36
# or newer on the GPU machine (Ubuntu 24.04 has 2.39).
# File names are reduced to letters, digits, '.', '_' and '-' so that any copy tool keeps them.
#
# usage: run_scripts/fetch_gpu_debs.sh [DIR]     (default DIR: .debs/ in the repository, which
#        git ignores). Then, before a GPU is at hand, check that they configure the project:
#        MRCNN_DEBS=DIR MRCNN_GPU_STAGES=configure run_scripts/gpu_check.sh
set -euo pipefail
# -h or --help: the header above, before any work.
for _a in "$@"; do [[ $_a == -h || $_a == --help ]] && { sed -n '2,/^[^#]/s/^# \{0,1\}//p' "${BASH_SOURCE[0]}"; exit 0; }; done

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
dir="${1:-$repo/.debs}"
packages=(
  nlohmann-json3-dev
  libspdlog-dev libspdlog1.10 libfmt-dev libfmt9
  libgtest-dev libgmock-dev
  libbenchmark-dev libbenchmark1debian
  libturbojpeg0-dev libturbojpeg0 libjpeg62-turbo-dev libjpeg62-turbo
  libpng-dev libpng16-16 zlib1g-dev zlib1g
  libssl-dev libssl3
  pkg-config pkgconf pkgconf-bin libpkgconf3
)
mkdir -p "$dir"
cd "$dir"
apt-get download "${packages[@]}"
for f in *.deb; do
  plain="$(printf '%s' "$f" | sed 's/%3a/_/g; s/[^A-Za-z0-9._-]/_/g')"
  [[ $plain == "$f" ]] || mv -f "$f" "$plain"
done
echo "$(ls ./*.deb | wc -l) packages in $dir ($(du -sh . | cut -f1))" >&2
