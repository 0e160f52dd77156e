"""D2H of 64 MB: into fresh numpy memory, into memory touched before, into pinned memory."""
import time, numpy as np
from cuda.bindings import driver as cu
def ok(r):
    if r[0] != cu.CUresult.CUDA_SUCCESS: raise RuntimeError(r)
    return r[1] if len(r) > 1 else None
ok(cu.cuInit(0)); dev = ok(cu.cuDeviceGet(0)); ctx = ok(cu.cuDevicePrimaryCtxRetain(dev)); ok(cu.cuCtxSetCurrent(ctx))
n = 64 << 20
d = ok(cu.cuMemAlloc(n))
ok(cu.cuMemsetD32(d, 1, n // 4))
print(open('/sys/kernel/mm/transparent_hugepage/enabled').read().strip())
for label in ["fresh", "fresh", "touched", "touched"]:
    out = np.empty(n, np.uint8)
    if label == "touched": out[:] = 0
    t = time.perf_counter(); ok(cu.cuMemcpyDtoH(out.ctypes.data, d, n)); dt = time.perf_counter() - t
    print(label, f"{n / dt / 1e9:.1f} GB/s", f"{dt*1e3:.1f} ms")
t = time.perf_counter(); p = ok(cu.cuMemHostAlloc(n, 0)); print("pin alloc", f"{(time.perf_counter()-t)*1e3:.1f} ms")
for _ in range(2):
    t = time.perf_counter(); ok(cu.cuMemcpyDtoH(p, d, n)); dt = time.perf_counter() - t
    print("pinned", f"{n / dt / 1e9:.1f} GB/s", f"{dt*1e3:.1f} ms")
arr = np.empty(n, np.uint8)
t = time.perf_counter(); arr[:] = np.ctypeslib.as_array((np.ctypeslib.ctypes.c_uint8 * n).from_address(int(p))); print("pinned->numpy copy", f"{(time.perf_counter()-t)*1e3:.1f} ms")
src = np.ones(n, np.uint8)
for label in ["upload pageable", "upload pageable"]:
    t = time.perf_counter(); ok(cu.cuMemcpyHtoD(d, src.ctypes.data, n)); dt = time.perf_counter() - t
    print(label, f"{n / dt / 1e9:.1f} GB/s")
