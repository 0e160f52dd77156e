"""scripts/: the helpers that live beside the harness (no network: pip is stood in for)."""

import os
import stat
import subprocess

from harness.kernels.registry import PROJECT_ROOT

WHEELS = PROJECT_ROOT / "scripts" / "wheels.sh"


def _pip_stood_in(tmp_path) -> dict[str, str]:
    """An environment whose python3 writes its arguments to tmp_path/args, a line a call,
    and whose wheels go to tmp_path/whl."""
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "python3").write_text('#!/bin/sh\necho "$@" >> "$ARGS_FILE"\n')
    (fake / "python3").chmod(0o755)
    return {**os.environ, "PATH": f"{fake}:{os.environ['PATH']}",
            "ARGS_FILE": str(tmp_path / "args"), "WHEEL_DIR": str(tmp_path / "whl")}


def test_wheels_script_downloads_nvmath_for_the_gpu_hosts_python(tmp_path):
    assert WHEELS.stat().st_mode & stat.S_IXUSR, "scripts/wheels.sh must be executable"
    env = _pip_stood_in(tmp_path)
    proc = subprocess.run(["bash", str(WHEELS), "extra-package==1.2"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    download, wheel = (tmp_path / "args").read_text().splitlines()
    assert wheel.split()[:3] == ["-m", "pip", "wheel"]  # the project's own, for its entry points
    args = download.split()
    assert args[:3] == ["-m", "pip", "download"]
    for flag in ("--no-deps", "--only-binary=:all:", "manylinux_2_28_x86_64",
                 "nvmath-python==1.0.*", "extra-package==1.2"):
        assert flag in args, flag
    assert args[args.index("--python-version") + 1] == "3.12"
    assert args[args.index("--implementation") + 1] == "cp"
    assert args[args.index("-d") + 1] == str(tmp_path / "whl")
    assert (tmp_path / "whl").is_dir()


def test_wheels_script_fetches_cudnns_frontend_for_the_attention_baseline(tmp_path):
    """--attention: nvidia-cudnn-frontend, pinned (the `cudnn_sdpa` baseline); not without it."""
    env = _pip_stood_in(tmp_path)
    for argv, wanted in ((["--attention", "--cluster"], True), ([], False)):
        (tmp_path / "args").write_text("")
        proc = subprocess.run(["bash", str(WHEELS), *argv], cwd=tmp_path, env=env,
                              capture_output=True, text=True, timeout=60)
        assert proc.returncode == 0, proc.stderr
        args = (tmp_path / "args").read_text().splitlines()[0].split()
        assert ("nvidia-cudnn-frontend==1.32.0" in args) == wanted, args
        assert ("dask==2026.8.0" in args) == wanted
        assert "--attention" not in args
