// The FP8 fixtures' decoder (issue 36): an OCP FP8 code to its exact FP32 value, by bit
// manipulation, with no cuda_fp8.h. It compiles under NVRTC (the fixtures include it) and
// under a host C++ compiler, where tests/test_fp8_fixtures.py checks all 256 codes of both
// formats against harness.bench.fp8.FORMATS[...].decode.
//
//   e4m3 (OCP E4M3FN): 1 sign, 4 exponent bits (bias 7), 3 mantissa bits, subnormals,
//                      S.1111.111 is NaN, no infinities (S.1111.110 = +-448).
//   e5m2:              1 sign, 5 exponent bits (bias 15), 2 mantissa bits, subnormals,
//                      IEEE-like: exponent 31 holds +-inf (mantissa 0) and NaNs.
//
// Every FP8 value is exact in FP32: a normal code's exponent and mantissa fields move into
// FP32's with the bias changed (127 - 7 = 120, 127 - 15 = 112); a subnormal is its mantissa
// (an integer) times 2^(1 - bias - mantissa bits), a product by a power of two, exact.
#pragma once

#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
#define FP8_DECODE_FN __host__ __device__ __forceinline__
#else
#define FP8_DECODE_FN inline
#endif

FP8_DECODE_FN float fp8_float_from_bits(unsigned int bits) {
#if defined(__CUDA_ARCH__)
    return __uint_as_float(bits);
#else
    float f;
    __builtin_memcpy(&f, &bits, sizeof f);
    return f;
#endif
}

FP8_DECODE_FN float fp8_e4m3_to_float(unsigned int code) {
    const unsigned int sign = (code & 0x80u) << 24;
    const unsigned int em = code & 0x7Fu;  // exponent and mantissa: eeee.mmm
    if (em == 0x7Fu) return fp8_float_from_bits(sign | 0x7FC00000u);  // NaN
    if ((em >> 3) == 0) {                                              // zero, subnormal
        const float v = (float)em * 0x1p-9f;                           // m * 2^(1 - 7 - 3)
        return sign ? -v : v;
    }
    return fp8_float_from_bits(sign | ((em << 20) + ((127u - 7u) << 23)));
}

FP8_DECODE_FN float fp8_e5m2_to_float(unsigned int code) {
    const unsigned int sign = (code & 0x80u) << 24;
    const unsigned int em = code & 0x7Fu;  // eeeee.mm
    if ((em >> 2) == 31u)                  // infinity (mantissa 0) or NaN
        return fp8_float_from_bits(sign | ((em & 3u) ? 0x7FC00000u : 0x7F800000u));
    if ((em >> 2) == 0) {                  // zero, subnormal
        const float v = (float)em * 0x1p-16f;  // m * 2^(1 - 15 - 2)
        return sign ? -v : v;
    }
    return fp8_float_from_bits(sign | ((em << 21) + ((127u - 15u) << 23)));
}
