"""A kernel's host set-up: ``<kernel>.py`` beside the kernel file, for what a spec cannot say.

A declared signature may take values only the host can compute (``{ host = "tiles", type =
"i32" }``) or a workspace whose contents the host builds (``{ name = "workspace", bytes =
"...", fill = "host" }``), for example a tile schedule in a Hilbert-curve order. The kernel's
``.py`` file (same folder, same stem: ``examples/wgmma_cluster_bf16.cu`` ->
``examples/wgmma_cluster_bf16.py``) defines one function::

    def setup(launch):          # launch: a HostLaunch (below)
        order = ...             # numpy only; no CUDA calls
        return {"workspace": np.asarray(order, np.int32), "tiles": len(order)}

It is called once per launch configuration (kernel variant and problem size), before any
launch and outside every timed region, in a process of its own (``python -m
harness.kernels.hostsetup``): it hands back data only (numbers and the workspace's bytes, as
JSON), so no code of the kernel's author runs beside the verifier and the timer. The workspace
contents it returns are copied into the kernel's workspace before every launch (so a kernel
may consume them). It returns a dict with ``workspace`` (for ``fill = "host"``; a numeric
array or bytes no larger than the declared ``bytes``) and one value per ``host`` entry. An
exception in it, a missing key or a value of the wrong kind is a
:class:`~harness.errors.SpecError` naming the file and line.
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import importlib.util
import json
import os
import subprocess
import sys
import traceback
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from harness.errors import SpecError

FUNCTION = "setup"


@dataclass(frozen=True)
class HostLaunch:
    """What a host set-up function receives: the problem, the variant and the device."""

    m: int
    n: int
    k: int
    params: dict[str, int] = field(default_factory=dict)
    """The variant's ``[params]`` values."""
    grid: tuple[int, int, int] = (1, 1, 1)
    """The launch grid the spec's formulas give at this size on this device."""
    block: tuple[int, int, int] = (1, 1, 1)
    sm_count: int = 132
    device_name: str = ""
    arch: str = ""
    """The device's architecture name (``sm_90``)."""
    buffers: dict[str, int] = field(default_factory=dict)
    """Device addresses of the launch's operands (A, B, C and D where the kernel has one)."""
    workspace_bytes: int = 0
    """The declared workspace size at this problem size (0 without a workspace)."""


@dataclass(frozen=True)
class HostValues:
    """What a host set-up returned, checked: the workspace bytes and the host entries."""

    workspace: bytes | None
    values: dict[str, int | float]


def setup_path(kernel_path: Path) -> Path:
    """Where a kernel's host set-up lives: beside it, same stem, ``.py``."""
    return Path(kernel_path).with_suffix(".py")


def missing_setup(kernel_path: Path, keys: tuple[str, ...]) -> str | None:
    """Why a kernel that needs host set-up (``keys``: what it must return) cannot have it, or
    None when the file is there."""
    path = setup_path(kernel_path)
    if path.is_file():
        return None
    wants = ", ".join(repr(k) for k in keys)
    return (f"its signature needs host set-up ({wants}) but {path.name} is not beside "
            f"{Path(kernel_path).name}: write {path} with def {FUNCTION}(launch) returning a "
            f"dict with {wants} (docs/gemm.md, 'Host set-up')")


_MODULES: dict[tuple[Path, str], object] = {}


def _load(path: Path):
    """The set-up function (loaded once per file contents); import errors as spec errors."""
    key = (path.resolve(), hashlib.sha256(path.read_bytes()).hexdigest())
    if key in _MODULES:
        return _MODULES[key]
    name = f"_harness_setup_{abs(hash(key[0]))}"
    module_spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(module_spec)
    try:
        module_spec.loader.exec_module(module)
    except SyntaxError as exc:
        raise SpecError(f"{path}:{exc.lineno}: host set-up does not parse: {exc.msg}") from None
    except Exception as exc:  # noqa: BLE001 (the user's module: any error is reported)
        raise SpecError(_where(exc, path, "importing the host set-up")) from None
    function = getattr(module, FUNCTION, None)
    if not callable(function):
        raise SpecError(f"{path}: host set-up defines no function {FUNCTION}(launch); define "
                        f"def {FUNCTION}(launch) returning a dict (docs/gemm.md, 'Host set-up')")
    _MODULES[key] = function
    return function


def _where(exc: BaseException, path: Path, doing: str) -> str:
    """``file:line: doing: Type: message`` at the innermost frame in the set-up file."""
    frames = [f for f in traceback.extract_tb(exc.__traceback__)
              if Path(f.filename).resolve() == path.resolve()]
    line = f":{frames[-1].lineno}" if frames else ""
    return f"{path}{line}: {doing}: {type(exc).__name__}: {exc}"


SETUP_LIMIT_S = 120.0
"""The longest a host set-up may take (a schedule for a large problem takes well under a
second)."""
_DONE: dict[tuple, HostValues] = {}


def run_setup(kernel_path: Path, keys: tuple[str, ...], launch: HostLaunch) -> HostValues:
    """The kernel's ``setup(launch)``, called in a process of its own, checked to have
    returned ``keys``; answered once per set-up file contents and launch in a process."""
    why = missing_setup(kernel_path, keys)
    if why is not None:
        raise SpecError(f"{kernel_path}: {why}")
    path = setup_path(kernel_path)
    key = (str(path.resolve()), hashlib.sha256(path.read_bytes()).hexdigest(), keys,
           json.dumps(dataclasses.asdict(launch), sort_keys=True))
    if key not in _DONE:
        _DONE[key] = _in_child(path, keys, launch)
    return _DONE[key]


def _in_child(path: Path, keys: tuple[str, ...], launch: HostLaunch) -> HostValues:
    """``python -m harness.kernels.hostsetup`` told the set-up file, keys and launch as JSON
    on stdin; its answer, one JSON object, on stdout."""
    package_root = str(Path(__file__).resolve().parents[2])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [package_root, *filter(None, [os.environ.get("PYTHONPATH")])])}
    request = json.dumps({"path": str(path), "keys": list(keys),
                          "launch": dataclasses.asdict(launch)})
    try:
        done = subprocess.run([sys.executable, "-m", "harness.kernels.hostsetup"],
                              input=request, capture_output=True, text=True, env=env,
                              timeout=SETUP_LIMIT_S)
    except subprocess.TimeoutExpired:
        raise SpecError(f"{path}: {FUNCTION}() at {launch.m}x{launch.n}x{launch.k} ran past "
                        f"{SETUP_LIMIT_S:g} s; a host set-up computes a schedule or a few "
                        "numbers") from None
    try:
        answer = json.loads(done.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        tail = (done.stderr or done.stdout).strip()[-800:]
        raise SpecError(f"{path}: the host set-up's process ended (exit {done.returncode}) "
                        f"without an answer: {tail}") from None
    if "error" in answer:
        raise SpecError(answer["error"])
    raw = answer.get("workspace")
    return HostValues(None if raw is None else base64.b64decode(raw), answer["values"])


def _main() -> int:
    """The host set-up's own process: one request on stdin, one JSON answer on stdout."""
    request = json.loads(sys.stdin.read())
    launch = request["launch"]
    launch = HostLaunch(**{**launch, "grid": tuple(launch["grid"]),
                           "block": tuple(launch["block"])})
    try:
        found = _call(Path(request["path"]), tuple(request["keys"]), launch)
        answer = {"values": found.values, "workspace": None if found.workspace is None
                  else base64.b64encode(found.workspace).decode()}
    except SpecError as exc:
        answer = {"error": str(exc)}
    sys.stdout.write("\n" + json.dumps(answer) + "\n")
    return 0


def _call(path: Path, keys: tuple[str, ...], launch: HostLaunch) -> HostValues:
    """Call ``setup(launch)`` here and check what it returned."""
    function = _load(path)
    try:
        out = function(launch)
    except Exception as exc:  # noqa: BLE001
        raise SpecError(_where(exc, path, f"{FUNCTION}() at {launch.m}x{launch.n}x{launch.k}")
                        ) from None
    if not isinstance(out, dict):
        raise SpecError(f"{path}: {FUNCTION}() must return a dict with "
                        f"{', '.join(map(repr, keys))}, returned {type(out).__name__}")
    missing = [k for k in keys if k not in out]
    extra = sorted(set(out) - set(keys))
    if missing or extra:
        raise SpecError(f"{path}: {FUNCTION}() returned keys {sorted(out)}; the signature "
                        f"expects exactly {list(keys)}"
                        + (f" (missing {', '.join(missing)})" if missing else "")
                        + (f" (not in the signature: {', '.join(extra)})" if extra else ""))
    workspace = None
    if "workspace" in keys:
        raw = out["workspace"]
        array = np.asarray(raw) if not isinstance(raw, bytes | bytearray | str) else None
        if array is not None and array.dtype.kind not in "biuf":
            array = None
        if array is None and not isinstance(raw, bytes | bytearray):
            raise SpecError(f"{path}: {FUNCTION}()['workspace'] must be a numeric numpy array "
                            f"or bytes, got {type(raw).__name__} {str(raw)[:40]!r}")
        workspace = bytes(raw) if array is None else np.ascontiguousarray(array).tobytes()
        if len(workspace) > launch.workspace_bytes:
            raise SpecError(f"{path}: {FUNCTION}()['workspace'] is {len(workspace)} bytes at "
                            f"{launch.m}x{launch.n}x{launch.k}; the signature declares "
                            f"{launch.workspace_bytes} (its bytes formula): enlarge the formula "
                            "or return less")
    values = {}
    for key in keys:
        if key == "workspace":
            continue
        value = out[key]
        if isinstance(value, np.generic):
            value = value.item()
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise SpecError(f"{path}: {FUNCTION}()[{key!r}] must be a number, got "
                            f"{type(value).__name__} {value!r}")
        values[key] = value
    return HostValues(workspace, values)


if __name__ == "__main__":
    sys.exit(_main())
