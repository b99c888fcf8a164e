"""run_scripts/Dockerfile, the container recipe, against the run profile it must equal (no image
is built here: the project's machines have no container builder):

  1. the image gets its Debian packages and .venv from run_scripts/bootstrap.sh's run profile (not
     --test) and its build from configure_build.sh, for every CUDA architecture the wheel carries;
     it installs nothing else itself but NVIDIA's CUDA toolkit (and the curl that fetches its key);
  2. bootstrap.sh's run profile holds no test-only package (Slurm, munge, Chromium);
  3. the build context leaves out what .gitignore calls build outputs, environments and data.
"""
import re

import mrcnn_testenv as env

SCRIPTS = env.SOURCE_DIR / "run_scripts"


def main():
    recipe = (SCRIPTS / "Dockerfile").read_text()
    # Joined continuation lines, comments dropped: one instruction a line.
    lines = [l for l in re.sub(r"\\\n\s*", " ", recipe).splitlines() if l.strip() and not l.lstrip().startswith("#")]
    runs = [l for l in lines if l.startswith("RUN ")]
    assert lines[0].startswith("ARG BASE=debian:bookworm") and lines[1] == "FROM ${BASE}", lines[:2]

    # 1. the run profile and the project's build
    build = [r for r in runs if "bootstrap.sh" in r]
    assert len(build) == 1, runs
    assert re.search(r"bash run_scripts/bootstrap\.sh(\s|$|&)", build[0]) and "--test" not in build[0], build[0]
    assert "bash run_scripts/configure_build.sh build -DMRCNN_CUDA_ARCHS_WITHOUT_GPU=all" in build[0], build[0]
    assert "cmake --build build" in build[0] and "--target mlperf-maskrcnn" in build[0], build[0]
    installed = []
    for r in runs:
        for m in re.finditer(r"apt-get install ([^&]*)", r):
            installed += [w for w in m.group(1).split() if not w.startswith("-")]
    assert installed == ["ca-certificates", "curl", "cuda-toolkit-${CUDA_VERSION}"], installed
    assert 'ENTRYPOINT ["mlperf-maskrcnn"]' in lines, lines
    print(f"recipe: {len(runs)} RUN steps; packages and .venv from bootstrap.sh's run profile; "
          f"besides it only {installed}")

    # 2. the run profile holds no test package
    boot = (SCRIPTS / "bootstrap.sh").read_text()
    run_debs = re.search(r"^debs=\((.*?)^\)", boot, re.M | re.S).group(1)
    test_debs = re.search(r"if \[\[ \$profile == test \]\]; then\s*debs\+=\((.*?)\)", boot, re.S).group(1)
    words = lambda block: {w for l in block.splitlines() for w in l.split("#")[0].split()}
    for pkg in ("slurm-wlm", "munge", "chromium"):
        assert pkg not in words(run_debs) and pkg in words(test_debs), pkg
    assert {"build-essential", "cmake", "libopenmpi-dev", "libssl-dev"} <= words(run_debs), words(run_debs)
    print(f"bootstrap run profile: {len(words(run_debs))} packages, none of the test profile's "
          f"{sorted(words(test_debs))}")

    # 3. the build context
    ignored = {l.strip() for l in (SCRIPTS / "Dockerfile.dockerignore").read_text().splitlines()
               if l.strip() and not l.startswith("#")}
    for pattern in ("/build*/", "/.venv/", "/out/", "/data/", "gpu-check/", "/.debs/"):
        assert pattern in (env.SOURCE_DIR / ".gitignore").read_text(), pattern
        assert pattern.lstrip("/") in ignored, (pattern, ignored)
    print(f"context: {sorted(ignored)} left out")


if __name__ == "__main__":
    main()
