/* harness
entry = "HK::tiledGemm<TILE>"
summary = "Test fixture: a kernel kept in a header with its host code (tiled.cuh, unmodified), this file only its spec and the #include."
precision = "fp32"
min_arch = "sm_90a"
block = ["TILE", "TILE"]
grid = ["cdiv(N, TILE)", "cdiv(M, TILE)"]
[params]
TILE = 32
*/
#include "tiled.cuh"
