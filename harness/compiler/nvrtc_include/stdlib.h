// <stdlib.h> for NVRTC, which has no C standard library (the harness puts this folder last on
// NVRTC's include path). <cuda.h> includes it for size_t; device code has no use for the rest
// (malloc and free are device built-ins under NVRTC). size_t comes from libcu++.
#pragma once
#include <cuda/std/cstddef>
