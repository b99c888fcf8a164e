"""Every script in run_scripts/ answers -h and --help before any work: exit 0 within seconds, a
usage line naming the script on stdout, and nothing run or written. A script that bootstraps or
builds first (demo.sh, test.sh) would take minutes and install packages; one that takes a folder
as its first argument (gpu_check.sh) would create a folder named --help.

"Nothing run": the commands such work starts (cmake, ctest, apt-get, pip, mpirun, ...) are
stand-ins on PATH that note their calls; none may be called. "Nothing written": the scripts run in
an empty folder, with every build, environment and results folder they read from the environment
pointed into it, and it must stay empty.
"""
import os
import pathlib
import stat
import sys
import time

import mrcnn_testenv as env

SCRIPTS = env.SOURCE_DIR / "run_scripts"
WORK = ["cmake", "ctest", "ninja", "make", "apt-get", "apt", "dpkg", "dpkg-deb", "sudo", "pip", "pip3", "python",
        "python3", "mpirun", "srun", "sbatch", "docker", "git", "clang++", "clang++-16", "c++", "g++", "gcc", "nvcc",
        "nvidia-smi", "curl", "wget", "torchrun"]
SECONDS = 20   # a python script's --help imports its modules (torch for some); a shell script's is instant


def stand_ins(folder, calls):
    folder.mkdir()
    for name in WORK:
        f = folder / name
        f.write_text(f'#!/bin/sh\necho "{name} $*" >>"{calls}"\nexit 1\n')
        f.chmod(f.stat().st_mode | stat.S_IXUSR)


def main():
    scripts = sorted(SCRIPTS.glob("*.sh")) + sorted(SCRIPTS.glob("*.py"))
    assert len(scripts) >= 12 and SCRIPTS / "demo.sh" in scripts and SCRIPTS / "test.sh" in scripts, scripts
    with env.scratch_dir("script-help") as tmp:
        tmp = pathlib.Path(tmp)
        calls = tmp / "calls.txt"
        stand_ins(tmp / "bin", calls)
        cwd = tmp / "cwd"
        cwd.mkdir()
        elsewhere = cwd / "not-to-be-made"
        e = {k: v for k, v in os.environ.items() if not k.startswith("MRCNN_")}
        e.update(PATH=f"{tmp / 'bin'}:/usr/bin:/bin", MRCNN_BUILD_DIR=str(elsewhere / "build"),
                 MRCNN_VENV=str(elsewhere / "venv"), MRCNN_FUZZ_BUILD_DIR=str(elsewhere / "fuzz"),
                 MRCNN_SANITIZE_BUILD_DIR=str(elsewhere / "asan"), BUILD_DIR=str(elsewhere / "build"),
                 RESULTS_DIR=str(elsewhere / "results"), SYSTEM="aws-p5.48xlarge")
        for script in scripts:
            run = ["/bin/bash", script] if script.suffix == ".sh" else [env.PYTHON, script]
            for flag in ("--help", "-h"):
                start = time.monotonic()
                p = env.run([*run, flag], env=e, cwd=cwd, timeout=120)
                took = time.monotonic() - start
                what = f"{script.name} {flag}"
                assert p.returncode == 0, f"{what}: exit {p.returncode}\n{p.stdout}{p.stderr}"
                usage = [l for l in p.stdout.splitlines() if "usage:" in l.lower()]
                assert usage and script.name in usage[0], f"{what}: no usage line naming the script:\n{p.stdout}"
                assert took < SECONDS, f"{what}: {took:.1f} s"
                assert not calls.exists(), f"{what} did work: {calls.read_text()}"
                assert not any(cwd.iterdir()), f"{what} wrote {sorted(cwd.rglob('*'))}"
            print(f"{script.name:24s} exit 0 in {took:.1f} s: {usage[0].strip()[:90]}")


if __name__ == "__main__":
    sys.exit(main())
