"""gpu_check.sh with carried Debian packages (MRCNN_DEBS), as on a GPU machine without internet.

run_scripts/fetch_gpu_debs.sh downloads the packages (skipped, exit 77, where apt-get cannot);
the configure stage then unpacks them into OUT/prefix and must take every C++ dependency from
there, not from this machine's own copies: the CMake packages (nlohmann_json, spdlog, fmt,
GoogleTest, Google Benchmark), libturbojpeg through the carried pkg-config files, libpng, zlib
and OpenSSL's libcrypto (the fingerprint's SHA-256; an H200 machine had no libssl-dev).
Absolute links inside the packages (libz.so -> /lib/...) must point into the prefix.
"""
import os
import pathlib
import sys

import mrcnn_testenv as env


def main():
    with env.scratch_dir("gpu-check-debs") as tmp:
        tmp = pathlib.Path(tmp)
        debs = tmp / "debs"
        p = env.run(["bash", env.SOURCE_DIR / "run_scripts" / "fetch_gpu_debs.sh", debs], timeout=300)
        if p.returncode != 0:
            print(f"SKIPPED: the packages cannot be downloaded here:\n{p.stderr[-1500:]}")
            sys.exit(77)
        names = sorted(f.name for f in debs.glob("*.deb"))
        assert len(names) == 23, names
        assert all(set(n) <= set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-")
                   for n in names), names

        out = tmp / "out"
        e = dict(os.environ, MRCNN_PYTHON=env.PYTHON, MRCNN_GPU_STAGES="configure", MRCNN_DEBS=str(debs))
        p = env.run(["bash", env.SOURCE_DIR / "run_scripts" / "gpu_check.sh", out], env=e, timeout=300)
        assert p.returncode == 0, p.stderr[-3000:]
        assert "unpacked 23 carried .deb files" in (out / "summary.txt").read_text()
        prefix = (out / "prefix").resolve()
        cache = {}
        for line in (out / "build" / "CMakeCache.txt").read_text().splitlines():
            if ":" in line and "=" in line and not line.startswith(("//", "#")):
                key, value = line.split("=", 1)
                cache[key.split(":", 1)[0]] = value
        for key in ("nlohmann_json_DIR", "spdlog_DIR", "fmt_DIR", "GTest_DIR", "benchmark_DIR",
                    "pkgcfg_lib_TURBOJPEG_turbojpeg", "PNG_LIBRARY_RELEASE", "ZLIB_LIBRARY_RELEASE",
                    "OPENSSL_CRYPTO_LIBRARY"):
            assert key in cache, f"{key} not in the cache"
            assert pathlib.Path(cache[key]).resolve().is_relative_to(prefix), f"{key} = {cache[key]}"
        libz = prefix / "usr" / "lib" / "x86_64-linux-gnu" / "libz.so"
        assert libz.resolve().is_relative_to(prefix) and libz.resolve().is_file(), os.readlink(libz)
        print(f"{len(names)} carried packages; every C++ dependency configured from {prefix}")


if __name__ == "__main__":
    main()
