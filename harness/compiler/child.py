"""Each compile in a fresh child process: reproducible, stoppable by Ctrl-C and by a time limit.

NVRTC's output for one input is not always the same (NVRTC 13.5: the PTX it writes, so then
the registers ptxas gives; ``08_warptile``, at its ``__launch_bounds__`` cap of 128, was seen
at 127 and 128): it orders some of its work by the addresses of its objects. In one process
they depend on what the process compiled before; in a fresh one, on the address-space layout
(random by default) and on whatever the process allocated before NVRTC started (its
environment's size, its Python start-up). So every compile runs in a child of its own
(``python -m harness.compiler.child``) started the same way every time: layout fixed, a fixed
environment, folder and arguments (:func:`_child_env`). notes/reproducible_builds.md has the
measurements.

NVRTC does not look at signals while it works, so a compile in-process can be stopped by
neither Ctrl-C nor a timer; a child can: Ctrl-C ends it at once (SIGINT reaches it with the
rest of the terminal's process group, and its default action ends it mid-compile), and a
child past its time limit is killed. A child also dies with the process that started it.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.metadata
import importlib.util
import os
import pickle
import platform
import shutil
import signal
import subprocess
import sys
import threading
from pathlib import Path

from harness.compiler.say import note
from harness.errors import CompileError, HarnessError
from harness.gpu.compilers import CompilerOutput, compiler_versions

DEFAULT_LIMIT_S = 300.0
"""The default time limit of one compile, in seconds: the project's slowest kernel compiles in a
few seconds (a cold cache on a busy host, a few times that); a compile past this is a generated
file or an unrolling gone wrong (a 57 MB generated file ran for over 300 s and 3.9 GB)."""
LIMIT_ENV = "HARNESS_COMPILE_LIMIT_S"
"""The environment variable that sets the limit for every command and worker (0: none)."""
COMPILERS = ("nvrtc", "nvjitlink")

_HARNESS_PARENT = str(Path(__file__).resolve().parents[2])
_LIVE: set[subprocess.Popen] = set()
_LOCK = threading.Lock()
_stopping = False


class CompileTimeout(CompileError):
    """A compile ran past its time limit and was stopped."""


def compile_limit_s(limit_s: float | None = None) -> float | None:
    """The time limit of one compile in seconds (None: no limit): ``limit_s`` where given, else
    $HARNESS_COMPILE_LIMIT_S, else :data:`DEFAULT_LIMIT_S`; 0 means no limit."""
    if limit_s is None:
        text = os.environ.get(LIMIT_ENV, "").strip()
        if not text:
            return DEFAULT_LIMIT_S
        try:
            limit_s = float(text)
        except ValueError:
            raise HarnessError(f"{LIMIT_ENV}={text!r}: expected seconds (a number; 0 for no "
                               "limit)") from None
        where = LIMIT_ENV
    else:
        where = "the compile limit"
    if not limit_s >= 0 or limit_s == float("inf"):
        raise HarnessError(f"{where} {limit_s:g}: expected seconds above 0, or 0 for no limit")
    return limit_s or None


def run(compiler: str, args: tuple, what: str, limit_s: float | None = None) -> CompilerOutput:
    """``harness.gpu.compilers``' ``nvrtc_compile`` or ``nvjitlink_ptx`` (``compiler``) called
    with ``args`` in a fresh child process, stopped at ``limit_s`` seconds (see
    :func:`compile_limit_s`); ``what`` (the kernel and its file) names it in errors."""
    if compiler not in COMPILERS:
        raise ValueError(f"unknown compiler {compiler!r}")
    limit = compile_limit_s(limit_s)
    with _LOCK:
        if _stopping:
            raise KeyboardInterrupt
        proc = subprocess.Popen([*_launcher(), sys.executable, "-S", "-P", "-B", "-m",
                                 "harness.compiler.child", f"{os.getpid():012d}"], cwd="/",
                                env=_child_env(),
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE)
        _LIVE.add(proc)
    try:
        out, err = proc.communicate(pickle.dumps((compiler, args)), timeout=limit)
    except subprocess.TimeoutExpired:
        raise CompileTimeout(
            f"{what}: the compile ran past its limit of {limit:g} s and was stopped. The "
            "project's kernels compile in seconds: look for a generated file grown too large "
            "or a loop unrolled without end; to give it longer, raise the limit with "
            f"--compile-limit-s SECONDS (harness build) or {LIMIT_ENV}=SECONDS (every command; "
            "0 for no limit)") from None
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.communicate()  # reaps it, and closes its pipes
        with _LOCK:
            _LIVE.discard(proc)
    if proc.returncode == -signal.SIGINT:
        raise KeyboardInterrupt  # Ctrl-C reached the compile: the command stops with it
    try:
        status, value, random_layout = (pickle.loads(out) if proc.returncode == 0
                                        else (None, None, ""))
    except Exception:  # noqa: BLE001 - a reply cut short is the child's failure, said below
        status, value, random_layout = None, None, ""
    if random_layout:
        note(f"compiles run with the address-space layout random ({random_layout}): "
             "NVRTC's output can then differ from run to run (08_warptile was seen at 127 or "
             "128 registers), and the compile cache keeps the first it gets",
             once="random layout")
    if status == "ok":
        version = value.pop("version", None)
        _same_library(compiler, value.pop("library", None), what)
        here = compiler_versions()[compiler]
        if version is not None and version != here:
            raise CompileError(
                f"{what}: the compile process loaded {compiler} {version} where this process "
                f"has {here} (two installs of NVIDIA's {compiler} libraries, a wheel and a "
                "toolkit, or two wheels?): its cubin would be cached and reported as "
                f"{compiler} {here}; keep one install, or put the one to use first on "
                "LD_LIBRARY_PATH")
        return CompilerOutput(**value)
    if status == "error":
        raise CompileError(f"{what}: {value}")
    raise CompileError(f"{what}: the {compiler} process {_ended(proc.returncode)}"
                       f"{_tail(err)}")


def _same_library(compiler: str, loaded: str | None, what: str) -> None:
    """A compile process that loaded ``compiler``'s library from another file than this
    process found is an error: its output would be cached under this process's library."""
    wanted = _libraries().get(compiler)
    if wanted is None or loaded is None or os.path.realpath(loaded) == wanted:
        return
    raise CompileError(
        f"{what}: the compile process loaded {_LIBRARIES[compiler]} from {loaded} where this "
        f"process found it at {wanted}: two installs of NVIDIA's libraries (a wheel and a "
        "toolkit, or two wheels?) and one of them first on LD_LIBRARY_PATH; keep one, or put "
        "the one to use first on LD_LIBRARY_PATH")


_PASSED_ENV = ("LD_LIBRARY_PATH", "CUDA_HOME", "CUDA_PATH", "CONDA_PREFIX")
"""What the child keeps of the environment: where the CUDA libraries and headers are found.
Nothing else: the size of the environment moves the child's memory, and NVRTC's output with it
(an unrelated 1000-byte variable changed 08_warptile's cubin, and so did a PYTHONPATH that
named one folder twice)."""


def _child_env() -> dict[str, str]:
    """The child's environment: the same for every compile of one install of the harness,
    whatever the command, terminal, worker or test it runs under (argv, the working folder and
    the hash seed are fixed likewise: the child runs in /, its argument of fixed width, with
    -S, -P and -B: no site packages' start-up files, no working folder on its path, no
    bytecode written: a child that wrote its modules' bytecode got another 10_hoisted than the
    children that read it). Its PYTHONPATH is where this harness and cuda.bindings are, not the
    caller's."""
    env = {name: os.environ[name] for name in _PASSED_ENV if os.environ.get(name)}
    env["PYTHONPATH"] = os.pathsep.join(_import_roots())
    libraries = _libraries()
    if libraries:
        env[_LIBS_ENV] = os.pathsep.join(f"{name}={path}" for name, path in libraries.items())
    env["PYTHONHASHSEED"] = "0"
    return env


_LIBS_ENV = "HARNESS_CHILD_LIBS"
"""Where this process found NVIDIA's compiler libraries (``nvrtc=/abs/libnvrtc.so.13:...``):
the child loads those files before cuda.bindings asks for them."""
_LIBRARIES = {"nvrtc": "nvrtc", "nvjitlink": "nvJitLink"}
"""Each compiler's library, by cuda.pathfinder's name."""


@functools.cache
def _libraries() -> dict[str, str]:
    """Each compiler library's file as cuda.pathfinder finds it in this process, where the
    site start-up has run: in a virtual environment, under ``pip install --target`` with
    PYTHONPATH, in a conda prefix. The child starts with -S, so it would search the base
    interpreter's site-packages and miss a venv's wheels (DynamicLibNotFoundError); it loads
    these files instead, so it compiles with the libraries this process names in the cache
    key. A library not found here is left out: the child's own search then says why."""
    try:
        from cuda import pathfinder
    except ImportError:
        return {}
    found = {}
    for compiler, libname in _LIBRARIES.items():
        try:
            found[compiler] = os.path.realpath(pathfinder.load_nvidia_dynamic_lib(libname).abs_path)
        except Exception:  # noqa: BLE001 - not found (or unloadable): the child says why
            continue
    return found


@functools.cache
def _import_roots() -> tuple[str, ...]:
    """The folders the child imports from: this harness's, then, in the order this process's
    path has them, cuda.bindings' and cuda.pathfinder's and those that hold NVIDIA's library
    wheels (``nvidia/``, where cuda.pathfinder looks for libnvrtc): the child skips the site
    start-up that would find them, and must load the NVRTC this process names in the compile
    cache's key (with two installs of the wheels, a child that put cuda.bindings' folder first
    loaded NVRTC 13.5 where this process had 13.0)."""
    wanted = set()
    for name in ("cuda.bindings", "cuda.pathfinder"):
        try:
            spec = importlib.util.find_spec(name)
        except (ImportError, ValueError):
            continue
        if spec is not None and spec.origin:
            wanted.add(str(Path(spec.origin).resolve().parents[2]))  # .../cuda/<pkg>/x.py
    path = [str(Path(p).resolve()) for p in sys.path if p]
    roots = [_HARNESS_PARENT, *(p for p in path if p in wanted or Path(p, "nvidia").is_dir()),
             *sorted(wanted - set(path))]
    return tuple(dict.fromkeys(roots))


CHILD_MODULES = ("harness", "harness.compiler", "harness.compiler.child", "harness.compiler.say",
                 "harness.errors", "harness.gpu", "harness.gpu.check", "harness.gpu.compilers")
"""The harness's modules a child imports before it compiles."""


@functools.cache
def fingerprint() -> str:
    """What a compile's output depends on besides its input and the compiler: how the child
    starts (its launcher and environment) and the code it runs before NVRTC does (each moves
    NVRTC's memory: a change to this module changed 10_hoisted's cubin), this Python and
    cuda.bindings. Part of the compile cache's key, so that a cached cubin is the one a
    compile would give now."""
    digest = hashlib.sha256(repr((sys.version, sys.executable, _launcher(),
                                  sorted(_child_env().items()))).encode())
    for name in CHILD_MODULES:
        spec = importlib.util.find_spec(name)
        digest.update(Path(spec.origin).read_bytes() if spec and spec.origin else name.encode())
    try:
        digest.update(importlib.metadata.version("cuda-bindings").encode())
    except importlib.metadata.PackageNotFoundError:
        pass
    return digest.hexdigest()[:16]


@functools.cache
def _launcher() -> tuple[str, ...]:
    """``setarch <machine> -R`` where it works here: the child then starts with the layout
    fixed, sparing it a second start of the interpreter (:func:`_fixed_layout`)."""
    tool = shutil.which("setarch")
    if tool is None:
        return ()
    command = (tool, platform.machine(), "-R")
    try:
        works = subprocess.run([*command, "true"], capture_output=True, timeout=30).returncode
    except (OSError, subprocess.SubprocessError):
        return ()
    return command if works == 0 else ()


def stop_all() -> None:
    """End every compile in flight in this process, and start none until :func:`resume`
    (Ctrl-C in a parallel build: the waiting threads return at once)."""
    global _stopping
    with _LOCK:
        _stopping = True
        for proc in _LIVE:
            if proc.poll() is None:
                proc.kill()


def resume() -> None:
    """Compiles may start again after :func:`stop_all`."""
    global _stopping
    with _LOCK:
        _stopping = False


def _ended(returncode: int) -> str:
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = f"signal {-returncode}"
        hint = " (SIGKILL: out of memory?)" if returncode == -signal.SIGKILL else ""
        return f"was ended by {name}{hint}"
    return f"exited with status {returncode}"


def _tail(err: bytes, lines: int = 5) -> str:
    text = err.decode(errors="replace").strip().splitlines()[-lines:]
    return ": " + " | ".join(text) if text else ""


# --- in the child ----------------------------------------------------------------------------

def _die_with(parent: int) -> None:
    """Have the kernel end this process when its parent dies (Linux), so that a killed harness
    leaves no compile running behind it."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        return
    if os.getppid() != parent:  # the parent died before the call
        os._exit(1)


_NO_RANDOMIZE = 0x0040000
"""ADDR_NO_RANDOMIZE (<linux/personality.h>): the process's addresses are the same every run."""
_LAYOUT_ENV = "HARNESS_CHILD_LAYOUT"


def _fixed_layout() -> str:
    """Re-run this child with address-space layout randomisation off, and "" once it is; else
    why it cannot be (not Linux, or personality() refused, as a container's seccomp profile
    may). NVRTC orders some of its work by the addresses of its objects: with the layout
    random, a fresh process's first compile still varies now and then."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        current = libc.personality(0xFFFFFFFF)  # asks, changes nothing
    except (OSError, AttributeError) as exc:
        return f"personality() is not available here ({exc})"
    if current != -1 and current & _NO_RANDOMIZE:
        return ""
    if os.environ.get(_LAYOUT_ENV):  # re-run once already, and the flag did not hold
        return os.environ[_LAYOUT_ENV]
    if current == -1 or libc.personality(current | _NO_RANDOMIZE) == -1:
        return f"personality(ADDR_NO_RANDOMIZE) was refused ({os.strerror(ctypes.get_errno())})"
    os.environ[_LAYOUT_ENV] = "the layout stayed random after personality(ADDR_NO_RANDOMIZE)"
    os.execv(sys.executable, sys.orig_argv)  # the same interpreter, flags and arguments
    return "unreachable"  # pragma: no cover - execv does not return


def _load_libraries() -> None:
    """Load the compiler libraries the parent found (:func:`_libraries`), by their paths:
    cuda.pathfinder then finds them loaded and searches no further. NVRTC's builtins library
    beside it first, as cuda.pathfinder does for a wheel's NVRTC 13.0."""
    import ctypes

    for item in filter(None, os.environ.get(_LIBS_ENV, "").split(os.pathsep)):
        _, _, path = item.partition("=")
        if Path(path).name.startswith("libnvrtc."):
            builtins = sorted(Path(path).parent.glob("libnvrtc-builtins.so.*.*"))
            if len(builtins) == 1:
                ctypes.CDLL(str(builtins[0]), mode=os.RTLD_NOW | os.RTLD_GLOBAL)
        ctypes.CDLL(path, mode=os.RTLD_NOW | os.RTLD_GLOBAL)


def _loaded(compiler: str) -> str | None:
    """The file this process loaded ``compiler``'s library from (cuda.pathfinder's record)."""
    try:
        from cuda import pathfinder

        return pathfinder.load_nvidia_dynamic_lib(_LIBRARIES[compiler]).abs_path
    except Exception:  # noqa: BLE001 - an older cuda.pathfinder: nothing to compare
        return None


def main() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)  # Ctrl-C ends the compile at once
    random_layout = _fixed_layout()
    _die_with(int(sys.argv[1]))
    reply = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)  # anything a library prints goes to stderr, not into the reply
    compiler, args = pickle.load(sys.stdin.buffer)
    _load_libraries()
    from harness.gpu import compilers

    call = compilers.nvrtc_compile if compiler == "nvrtc" else compilers.nvjitlink_ptx
    try:
        out = call(*args)
    except HarnessError as exc:  # a compiler call that failed outright (CudaError)
        pickle.dump(("error", str(exc), random_layout), reply)
    else:
        pickle.dump(("ok", {"ok": out.ok, "cubin": out.cubin, "log": out.log,
                            "status": out.status, "lowered": out.lowered,
                            "version": compilers.compiler_versions()[compiler],
                            "library": _loaded(compiler)}, random_layout),
                    reply)
    reply.close()


if __name__ == "__main__":
    main()
