/* harness
kind = "buffers"
entry = "vector_add"
summary = "The README's first memory-bound kernel: out = x + y in FP32, one thread per element."
min_arch = "sm_80"
dims = ["N"]
sizes = ["1<<24", "1<<28"]
args = ["x", "y", "out", "N"]
block = ["256"]
grid = ["cdiv(N, 256)"]
reference = "py:reference"
tolerance = "exact"
bytes = "12*N"
baseline = "copy"

[buffers]                          # each buffer: element type, shape (formulas of the dims), role
x = { dtype = "f32", shape = ["N"], role = "in" }     # drawn afresh before every launch
y = { dtype = "f32", shape = ["N"], role = "in" }
out = { dtype = "f32", shape = ["N"], role = "out" }  # poisoned before every launch, checked
*/
// kind = "buffers": the kernel takes its own parameters, in the order args lists them (each
// buffer as a pointer, N as an int). reference = "py:reference" is reference() in
// vector_add.py beside this file; "exact" holds because an FP32 add is rounded once, as the
// float64 reference rounded to FP32 is. bytes: x and y read, out written, 4 bytes each.
extern "C" __global__ void vector_add(const float* x, const float* y, float* out, int N) {
    const size_t i = (size_t)blockIdx.x * 256 + threadIdx.x;
    if (i < (size_t)N) out[i] = x[i] + y[i];  // the last block's extra threads do nothing
}
