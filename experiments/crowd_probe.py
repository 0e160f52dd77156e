"""Where a crowd's blocks and the kernel behind it run (gpu/crowd.py): each crowd block's SM
and start, the hold's wait, each kernel block's SM and start (issue 37, the suite's
nondeterminism check)."""

from __future__ import annotations

import ctypes

import numpy as np

from harness.gpu.compilers import nvrtc_compile
from harness.gpu.crowd import Crowd, Press
from harness.gpu.driver import Buffer, Device, LaunchShape, Module, Stream

SOURCE = rb"""
extern "C" __global__ void where(unsigned long long* out, unsigned long long ns) {
    unsigned int id; asm volatile("mov.u32 %0, %%smid;" : "=r"(id));
    unsigned long long t0, t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
    do { asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)); } while (t - t0 < ns);
    if (threadIdx.x == 0) { out[2 * blockIdx.x] = id; out[2 * blockIdx.x + 1] = t0; }
}
"""


def main() -> None:
    with Device(0) as device:
        out = nvrtc_compile(SOURCE, "where.cu", [f"-arch={device.arch.name}"])
        where = Module(out.cubin, "where").function("where")
        stream, sms = Stream(), device.sm_count
        blocks = 4 * sms
        seen = Buffer(16 * blocks)
        crowd = Crowd(stream, sms)
        print("crowd regs", crowd._crowd.registers, "sms", sms,
              "max active crowd blocks/SM", crowd._crowd.max_active_blocks(1024, 0))

        def launch():
            where.launch(LaunchShape((blocks, 1, 1), (32, 1, 1), 0), stream,
                         (ctypes.c_uint64(seen.address), ctypes.c_uint64(5000)))

        for label, press in [("idle", None), ("0.875/120", Press(0.875, 120.0)),
                             ("0.5/40", Press(0.5, 40.0)), ("0.875/120 again",
                                                            Press(0.875, 120.0))]:
            if press is None:
                launch()
            else:
                crowd.around(launch, press)
            stream.synchronize()
            got = seen.download(np.uint64, (blocks, 2), stream)
            ids, starts = got[:, 0], got[:, 1].astype(np.int64)
            arrived = crowd.module.global_buffer("arrived").download(np.uint64, (1,), stream)[0]
            print(f"{label}: {len(set(ids.tolist()))} SMs; starts span "
                  f"{(starts.max() - starts.min()) / 1e3:.1f} us; crowd blocks arrived "
                  f"{arrived} of {crowd._arrived}")
        for _ in range(2):
            events(crowd, launch, Press(0.875, 120.0), stream)
            got = seen.download(np.uint64, (blocks, 2), stream)
            print(f"  with events: {len(set(got[:, 0].tolist()))} SMs")


def events(crowd: Crowd, launch, press: Press, stream: Stream) -> None:
    """around()'s steps with events on both streams: when each began and ended."""
    from harness.gpu.driver import Event

    ev = {n: Event() for n in ("crowd0", "crowd1", "hold0", "hold1", "kernel1")}
    blocks = press.blocks(crowd.sm_count)
    ns = int(press.stay_us * 1e3)
    ev["crowd0"].record(crowd.side)
    crowd._crowd.launch(LaunchShape((blocks, 1, 1), (1024, 1, 1), 0), crowd.side,
                        (ctypes.c_uint64(ns),))
    ev["crowd1"].record(crowd.side)
    crowd._arrived += blocks
    ev["hold0"].record(stream)
    crowd._hold.launch(LaunchShape((1, 1, 1), (1, 1, 1), 0), stream,
                       (ctypes.c_uint64(crowd._arrived), ctypes.c_uint64(ns)))
    ev["hold1"].record(stream)
    launch()
    ev["kernel1"].record(stream)
    stream.synchronize()
    crowd.side.synchronize()
    base = ev["crowd0"]
    print("  events (us after the crowd's start event):",
          {n: round(e.elapsed_ms(base) * 1e3, 1) for n, e in ev.items()})


if __name__ == "__main__":
    main()
