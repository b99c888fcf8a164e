"""pytest over the project's Python checks, as ctest runs them (tests/CMakeLists.txt): each
tests/**/test_*.py is a script whose exit status is the verdict (0 passed, 77 cannot run here,
anything else failed), so pytest runs each variant ctest has as one case, in its own process, with
ctest's environment:

    pytest tests/benchmark/analysis -q                     # one folder
    pytest tests/model/ops/test_roi_align.py               # one file: its native and portable cases
    pytest tests/model/ops -k portable                     # one device parametrization
    pytest tests/e2e/test_gpu_check.py -k rehearsal_steps  # one of a long check's parts

A case is named as ctest names it: `main`, a part of a "# ctest parts: ..." line, or `native` and
`portable` for the op checks ctest runs twice (MRCNN_OPS). MRCNN_BUILD_DIR picks the build
(default build/); .venv's Python runs them. ctest still runs them all; this is the same checks
under the ecosystem's runner.
"""
import os
import pathlib
import re
import subprocess
import sys

import pytest

SOURCE_DIR = pathlib.Path(__file__).resolve().parents[1]
SKIP = 77
# The op checks ctest runs a second time against the portable ATen compositions.
PORTABLE = re.compile(r"^model/ops/test_(roi_align|box_ops|proposals|mask_targets)\.py$")


def pytest_collect_file(parent, file_path):
    if file_path.suffix == ".py" and file_path.name.startswith("test_"):
        return CheckScript.from_parent(parent, path=file_path)
    return None


class CheckScript(pytest.File):
    def collect(self):
        rel = self.path.relative_to(SOURCE_DIR / "tests").as_posix()
        parts = re.search(r"^# ctest parts: (.+)$", self.path.read_text(), re.M)
        if parts:
            for p in parts.group(1).split():
                yield CheckCase.from_parent(self, name=p, argv=[p], environ={})
        elif PORTABLE.match(rel):
            yield CheckCase.from_parent(self, name="native", argv=[], environ={})
            yield CheckCase.from_parent(self, name="portable", argv=[], environ={"MRCNN_OPS": "portable"})
        else:
            yield CheckCase.from_parent(self, name="main", argv=[], environ={})


class CheckFailed(Exception):
    pass


class CheckCase(pytest.Item):
    def __init__(self, *, argv, environ, **kwargs):
        super().__init__(**kwargs)
        self.argv, self.environ = argv, environ

    def runtest(self):
        env = {k: v for k, v in os.environ.items() if k not in ("MRCNN_SYSTEM", "MRCNN_DATA_DIR", "MRCNN_OUT")}
        build = os.environ.get("MRCNN_BUILD_DIR", str(SOURCE_DIR / "build"))
        env.update(MRCNN_SOURCE_DIR=str(SOURCE_DIR), MRCNN_BUILD_DIR=build, PYTHONPATH=str(SOURCE_DIR / "tests"),
                   PYTHONDONTWRITEBYTECODE="1", **self.environ)
        venv = SOURCE_DIR / ".venv" / "bin" / "python"
        python = str(venv) if venv.exists() else sys.executable
        p = subprocess.run([python, str(self.path), *self.argv], cwd=build, env=env, capture_output=True, text=True)
        if p.returncode == SKIP:
            pytest.skip((p.stdout + p.stderr).strip().splitlines()[-1] if (p.stdout + p.stderr).strip() else "cannot run here")
        if p.returncode != 0:
            raise CheckFailed(f"exit status {p.returncode}\n{p.stdout[-4000:]}\n{p.stderr[-4000:]}")

    def repr_failure(self, excinfo):
        if isinstance(excinfo.value, CheckFailed):
            return str(excinfo.value)
        return super().repr_failure(excinfo)

    def reportinfo(self):
        return self.path, 0, f"{self.path.name}::{self.name}"
