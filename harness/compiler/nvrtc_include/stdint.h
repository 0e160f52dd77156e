// <stdint.h> for NVRTC, which has no C++ standard library (the harness puts this folder last on
// NVRTC's include path). The fixed-width integer types and their macros come from libcu++'s
// <cuda/std/cstdint> (the nvidia-cuda-cccl wheel, or a toolkit's include/cccl), which under
// NVRTC declares them in the global namespace.
#pragma once
#include <cuda/std/cstdint>
