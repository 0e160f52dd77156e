"""The memory ceiling a ``buffers`` kernel's GB/s is held to, measured by the harness itself on
the running GPU: a driver device-to-device copy and a read-only streaming kernel of ours, both
far past L2 and timed cold by :class:`harness.gpu.timing.Timer`, beside the DRAM peak the
device attributes give. Nothing moves bytes faster than that; a figure above it is wrong
(:func:`above_ceiling` says why).

The read kernel loads ``float4`` with a grid-stride loop, four independent loads in flight per
thread per trip (an H100 needs megabytes in flight to cover DRAM latency), and writes one sum
per block, so that no load is dead code; the sums are checked against the data's own sum.
"""

from __future__ import annotations

import ctypes
import math
from dataclasses import dataclass

import numpy as np

from harness.errors import CompileError, HarnessError
from harness.gpu import own_kernels
from harness.gpu.check import check
from harness.gpu.clocks import ClockSampler
from harness.gpu.driver import Buffer, Device, Function, LaunchShape, Module, Stream, cu
from harness.gpu.timing import Timer, TimingOptions

CEILING_BYTES = 2 << 30
"""The buffer the ceiling streams through (2 GiB: 40x an H100's 50 MB L2), or
:data:`FREE_FRACTION` of the free memory where that is smaller."""
FREE_FRACTION = 8
"""At most 1/8 of the free memory per buffer (the copy needs two, the timer its flush)."""
MIN_L2_MULTIPLE = 4
"""The buffer must be at least this many times L2, or the ceiling would be L2's."""
READ_BLOCK_THREADS = 256
FILL_CHUNK_BYTES = 4 << 20
"""Random data is drawn on the host this much at a time and doubled across the buffer on the
device (DRAM does not care that it repeats; a constant would draw less power)."""
READ_SUM_REL_TOL = 1e-3
"""The read kernel's per-block sums against the data's float64 sum: each thread adds a few
thousand values in [0, 1) in f32 (relative error at most ~1e-4), then the host adds the blocks'
sums in float64; a kernel that skipped a tenth of the data would be 10% off."""

READ_SOURCE = rb"""
extern "C" __global__ void __launch_bounds__(256)
read_sum(const float4* __restrict__ x, unsigned long long n4, float* __restrict__ out) {
    const unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
    unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
    float acc = 0.0f;
    for (; i + 3 * stride < n4; i += 4 * stride) {
        const float4 a = x[i], b = x[i + stride], c = x[i + 2 * stride], d = x[i + 3 * stride];
        acc += ((a.x + a.y) + (a.z + a.w)) + ((b.x + b.y) + (b.z + b.w))
             + ((c.x + c.y) + (c.z + c.w)) + ((d.x + d.y) + (d.z + d.w));
    }
    for (; i < n4; i += stride) {
        const float4 a = x[i];
        acc += (a.x + a.y) + (a.z + a.w);
    }
    for (int offset = 16; offset > 0; offset >>= 1)
        acc += __shfl_down_sync(0xffffffffu, acc, offset);
    __shared__ float warp_sums[32];
    if ((threadIdx.x & 31) == 0) warp_sums[threadIdx.x >> 5] = acc;
    __syncthreads();
    if (threadIdx.x < 32) {
        acc = threadIdx.x < (blockDim.x >> 5) ? warp_sums[threadIdx.x] : 0.0f;
        for (int offset = 16; offset > 0; offset >>= 1)
            acc += __shfl_down_sync(0xffffffffu, acc, offset);
        if (threadIdx.x == 0) out[blockIdx.x] = acc;
    }
}
"""


@dataclass(frozen=True)
class MemoryCeiling:
    """What the GPU's memory was measured to deliver, and its peak (GB/s: 1e9 bytes/s)."""

    copy_gbps: float
    """Driver device-to-device copy: 2 x bytes / median time (each byte read and written)."""
    read_gbps: float
    """The read-only streaming kernel: bytes / median time."""
    dram_peak_gbps: float
    """Memory clock x 2 x bus width (:attr:`harness.gpu.driver.Device.dram_bytes_per_s`)."""
    nbytes: int
    """The buffer size streamed through (far past L2)."""
    sm_clock_mhz: float
    """NVML's median SM clock over the timed repetitions (NaN without NVML)."""
    method: str
    """How it was measured, in one sentence."""

    @property
    def gbps(self) -> float:
        """The ceiling a figure is held to: the faster of the two measurements."""
        return max(self.copy_gbps, self.read_gbps)


def above_ceiling(gbps: float, ceiling: MemoryCeiling, margin: float = 0.03) -> str:
    """The empty string when ``gbps`` (compulsory bytes / median time) is possible on the GPU
    ``ceiling`` was measured on; else one sentence saying why it is not: above the DRAM peak,
    or above the measured ceiling by more than ``margin`` (a fraction: timing noise)."""
    if not math.isfinite(gbps) or gbps < 0:
        return f"{gbps} GB/s is not a bandwidth: the time or the byte count is wrong"
    if ceiling.dram_peak_gbps > 0 and gbps > ceiling.dram_peak_gbps:
        return (f"{gbps:.0f} GB/s is above the DRAM peak of {ceiling.dram_peak_gbps:.0f} "
                "GB/s (memory clock x bus width): nothing moves its compulsory bytes faster, "
                "so the kernel skipped work, kept data in L2 between launches, or declares "
                "fewer bytes than it must move")
    limit = ceiling.gbps * (1 + margin)
    if gbps > limit:
        return (f"{gbps:.0f} GB/s is above the measured memory ceiling of {ceiling.gbps:.0f} "
                f"GB/s (copy {ceiling.copy_gbps:.0f}, read {ceiling.read_gbps:.0f}) by "
                f"{100 * (gbps / ceiling.gbps - 1):.1f}%, more than the {100 * margin:g}% "
                "timing noise allows: the kernel skipped work, kept data in L2 between "
                "launches, or declares fewer bytes than it must move")
    return ""


def ceiling_bytes(free_bytes: int, l2_bytes: int) -> int:
    """The buffer size to measure with: :data:`CEILING_BYTES`, or 1/:data:`FREE_FRACTION` of
    ``free_bytes`` if smaller, rounded down to a MiB; at least :data:`MIN_L2_MULTIPLE` x L2."""
    nbytes = min(CEILING_BYTES, free_bytes // FREE_FRACTION) // (1 << 20) * (1 << 20)
    if nbytes < MIN_L2_MULTIPLE * l2_bytes or nbytes <= 0:
        raise HarnessError(
            f"the memory ceiling needs buffers of at least {MIN_L2_MULTIPLE} x L2 "
            f"({MIN_L2_MULTIPLE * l2_bytes / 2**20:.0f} MiB), found {free_bytes / 2**20:.0f} "
            f"MiB free (1/{FREE_FRACTION} of it: {nbytes / 2**20:.0f} MiB): free GPU memory "
            "(another process holds it) and measure again")
    return nbytes


def fill_random(buffer: Buffer, stream: Stream, seed: int = 0) -> float:
    """Fill ``buffer`` with f32 values drawn uniformly in [0, 1) (a :data:`FILL_CHUNK_BYTES`
    draw repeated; any bytes past the last whole f32 are left as they are), and wait for it.
    Returns the float64 sum of its f32 values."""
    chunk_floats = FILL_CHUNK_BYTES // 4
    total_floats = buffer.nbytes // 4
    if total_floats == 0:
        raise HarnessError(f"fill_random: a {buffer.nbytes}-byte buffer holds no f32")
    chunk = np.random.default_rng(seed).random(min(chunk_floats, total_floats),
                                               dtype=np.float32)
    buffer.upload_at(chunk, 0, stream)
    filled = chunk.nbytes
    end = total_floats * 4
    while filled < end:  # double the filled prefix: the contents repeat with the chunk's period
        count = min(filled, end - filled)
        check(cu.cuMemcpyDtoDAsync(buffer.address + filled, buffer.address, count,
                                   stream.handle), "cuMemcpyDtoDAsync", "fill_random")
        filled += count
    stream.synchronize("fill_random")
    periods, rest = divmod(total_floats, chunk.size)
    values = chunk.astype(np.float64)
    return periods * float(values.sum()) + float(values[:rest].sum())


READ = own_kernels.Source(READ_SOURCE, "memory_read.cu",
                          "the memory ceiling's read kernel (harness/kinds/buffers/roofline.py)")


def compile_read_kernel(arch_name: str) -> bytes:
    """The read kernel's cubin for ``arch_name`` (``sm_90``); needs no GPU."""
    return own_kernels.cubin(READ, arch_name, CompileError)


class _ReadKernel:
    """The read kernel over one buffer, one wave of blocks, its per-block sums kept."""

    def __init__(self, device: Device, source: Buffer, stream: Stream):
        self.module = Module(compile_read_kernel(device.arch.name), "memory ceiling read")
        self.function: Function = self.module.function("read_sum")
        per_sm = max(1, self.function.max_active_blocks(READ_BLOCK_THREADS, 0))
        self.blocks = per_sm * device.sm_count
        self.sums = Buffer(4 * self.blocks)
        self.stream = stream
        self.shape = LaunchShape((self.blocks, 1, 1), (READ_BLOCK_THREADS, 1, 1), 0)
        self.args = (ctypes.c_uint64(source.address), ctypes.c_uint64(source.nbytes // 16),
                     ctypes.c_uint64(self.sums.address))

    def launch(self) -> None:
        self.function.launch(self.shape, self.stream, self.args)

    def total(self) -> float:
        """The float64 sum of the blocks' sums, after the stream's work."""
        return float(self.sums.download(np.float32, (self.blocks,), self.stream)
                     .astype(np.float64).sum())

    def close(self) -> None:
        self.sums.close()
        self.module.close()


def measure_ceiling(device: Device, stream: Stream,
                    options: TimingOptions | None = None) -> MemoryCeiling:
    """Measure the copy and read bandwidth of ``device`` on ``stream`` (interleaved round by
    round, cold L2, by ``options``: the harness's defaults when None) and check that the read
    kernel read every byte."""
    options = options if options is not None else TimingOptions()
    if not options.cold_l2:
        raise HarnessError("the memory ceiling is measured with cold L2 (TimingOptions("
                           "cold_l2=True)): with warm L2 a repetition could read from L2")
    free_bytes, _ = check(cu.cuMemGetInfo(), "cuMemGetInfo")
    nbytes = ceiling_bytes(int(free_bytes), device.l2_bytes)
    source, target = Buffer(nbytes), Buffer(nbytes)
    read: _ReadKernel | None = None
    timer: Timer | None = None
    try:
        expected = fill_random(source, stream, seed=nbytes)
        read = _ReadKernel(device, source, stream)
        timer = Timer(stream, device.l2_bytes, ClockSampler(device.pci_bus_id), options)

        def copy() -> None:
            check(cu.cuMemcpyDtoDAsync(target.dptr, source.dptr, nbytes, stream.handle),
                  "cuMemcpyDtoDAsync", "memory ceiling copy")

        (copy_t, read_t), _ = timer.time_interleaved([copy, read.launch])
        read.launch()
        got = read.total()
        if not abs(got - expected) <= READ_SUM_REL_TOL * expected:
            raise HarnessError(
                f"the memory ceiling's read kernel summed {got:.6g} where the data sums to "
                f"{expected:.6g} (allowed {READ_SUM_REL_TOL:g} relative): it did not read "
                "every byte, so its time is no ceiling; report this as a harness bug")
    finally:
        if timer is not None:
            timer.flush_buffer.close()
        if read is not None:
            read.close()
        source.close()
        target.close()
    gib = nbytes / 2**30
    method = (f"cold L2 (a {2 * device.l2_bytes / 2**20:.0f} MiB write before every "
              f"repetition), CUDA events around each launch, copy and read interleaved round "
              f"by round, median of {copy_t.reps} repetitions ({options.regime}): a "
              f"cuMemcpyDtoDAsync of {gib:.2f} GiB (counted as 2x its bytes) and a float4 "
              f"grid-stride read kernel ({read.blocks} blocks x {READ_BLOCK_THREADS} threads) "
              f"over the same {gib:.2f} GiB of random f32")
    return MemoryCeiling(copy_gbps=2 * nbytes / (copy_t.median_ms * 1e-3) / 1e9,
                         read_gbps=nbytes / (read_t.median_ms * 1e-3) / 1e9,
                         dram_peak_gbps=device.dram_bytes_per_s / 1e9, nbytes=nbytes,
                         sm_clock_mhz=copy_t.sm_clock_mhz, method=method)
