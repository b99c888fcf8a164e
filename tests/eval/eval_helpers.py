"""Shared helpers of the eval/ Python checks: where the built binaries are."""
import os
import sys


def binary(rel_path):
    """Absolute path of a built binary (relative to the build folder); exits with a clear message
    when it has not been built."""
    build = os.environ.get("MRCNN_BUILD_DIR")
    if not build:
        sys.exit("MRCNN_BUILD_DIR is not set: run this check through ctest")
    path = os.path.join(build, rel_path)
    if not os.access(path, os.X_OK):
        sys.exit(f"{path} is missing: build it first (ninja -C {build} {os.path.basename(rel_path)})")
    return path
