"""The reference of examples/vector_add.cu (its spec says reference = "py:reference").

The harness calls it in a process of its own with the kernel's inputs, by buffer name, as
float64 numpy arrays, and its dims as ints; it returns each output by name. It rounds the
result to the output's type (FP32) and, the tolerance being "exact", wants the kernel's bits:
x + y in float64, rounded once to FP32, is the correctly rounded FP32 sum (float64's 53 bits
are enough that rounding twice changes nothing), which is what the kernel's one FP32 add gives.
"""


def reference(x, y, N):
    return {"out": x + y}
