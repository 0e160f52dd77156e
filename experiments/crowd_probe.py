"""Where a crowd's blocks and the kernel behind it run (gpu/crowd.py, issue 37): the SMs a
kernel's 528 one-warp blocks of 5 us reach on an idle GPU and behind each crowd, and whether a
one-thread kernel of another stream starts beside spinning 1024-thread blocks spread one or two
to an SM, or waits them out (why a crowd is one block an SM on its share of the SMs)."""

from __future__ import annotations

import ctypes

import numpy as np

from harness.gpu.compilers import nvrtc_compile
from harness.gpu.crowd import PRESSES, Crowd
from harness.gpu.driver import Buffer, Device, Event, LaunchShape, Module, Stream

SOURCE = rb"""
__device__ unsigned long long now() {
    unsigned long long t; asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t) :: "memory");
    return t;
}
extern "C" __global__ void where(unsigned int* sm, unsigned long long ns) {
    unsigned int id; asm volatile("mov.u32 %0, %%smid;" : "=r"(id));
    unsigned long long t0 = now();
    while (now() - t0 < ns) {}
    if (threadIdx.x == 0) sm[blockIdx.x] = id;
}
extern "C" __global__ void __launch_bounds__(1024) hog(unsigned long long ns) {
    unsigned long long t0 = now();
    while (now() - t0 < ns) {}
}
extern "C" __global__ void one() {}
"""


def main() -> None:
    with Device(0) as device:
        out = nvrtc_compile(SOURCE, "probe.cu", [f"-arch={device.arch.name}"])
        module = Module(out.cubin, "crowd probe")
        where, hog, one = (module.function(n) for n in ("where", "hog", "one"))
        stream, side, sms = Stream(), Stream(), device.sm_count
        blocks = 4 * sms
        seen = Buffer(4 * blocks)
        crowd = Crowd(stream, sms)
        print(f"{device.name}, {sms} SMs; 1024-thread spinning blocks an SM at most: "
              f"{hog.max_active_blocks(1024, 0)}")

        def launch():
            where.launch(LaunchShape((blocks, 1, 1), (32, 1, 1), 0), stream,
                         (ctypes.c_uint64(seen.address), ctypes.c_uint64(5000)))

        for press in (None, *PRESSES):
            start, end = Event(), Event()
            start.record(stream)
            if press is None:
                launch()
            else:
                crowd.around(launch, press)
            end.record(stream)
            stream.synchronize()
            ids = seen.download(np.uint32, (blocks,), stream)
            arrived = crowd.module.global_buffer("arrived").download(np.uint64, (1,), stream)
            print(f"{press or 'idle GPU'}: the kernel's {blocks} blocks on "
                  f"{len(set(ids.tolist()))} SMs; {end.elapsed_ms(start) * 1e3:.1f} us from "
                  f"the stream's start to the kernel's end; crowd blocks arrived {arrived[0]} "
                  f"of {crowd.launched}")
        for per_sm in (0, 1, 2):
            begin, hogged, alone = Event(), Event(), Event()
            begin.record(side)
            if per_sm:
                hog.launch(LaunchShape((per_sm * sms, 1, 1), (1024, 1, 1), 0), side,
                           (ctypes.c_uint64(100_000),))
            hogged.record(side)
            one.launch(LaunchShape((1, 1, 1), (1, 1, 1), 0), stream, ())
            alone.record(stream)
            stream.synchronize()
            side.synchronize()
            print(f"{per_sm * sms} spinning blocks of 100 us ({per_sm} an SM): they end at "
                  f"{hogged.elapsed_ms(begin) * 1e3:.1f} us, a one-thread kernel of another "
                  f"stream at {alone.elapsed_ms(begin) * 1e3:.1f} us")


if __name__ == "__main__":
    main()
