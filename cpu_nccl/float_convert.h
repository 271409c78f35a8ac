// Software conversions between float and the narrow floating types of nccl.h (fp16,
// bf16, fp8 e4m3 and e5m2), round-to-nearest-even as CUDA's intrinsics do.
// Threading: pure functions. No libm: bit manipulation and exact float arithmetic only.
#ifndef COLLWATCH_CPU_NCCL_FLOAT_CONVERT_H_
#define COLLWATCH_CPU_NCCL_FLOAT_CONVERT_H_

#include <cstdint>
#include <cstring>

namespace collwatch::cpu_nccl {

inline uint32_t FloatBits(float f) noexcept {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

inline float BitsFloat(uint32_t u) noexcept {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

// Rounds a non-negative float below 2^22 to the nearest integer, ties to even. Adding and
// subtracting 2^23 leaves only the integer part under the default rounding mode.
// (ISO C++ mode keeps this from being folded away: no -ffast-math, no contraction.)
inline float RoundHalfEven(float a) noexcept { return (a + 8388608.0f) - 8388608.0f; }

// IEEE binary16. Overflow rounds to infinity, NaN stays a (quiet) NaN, as __float2half.
inline uint16_t FloatToHalf(float f) noexcept {
  const uint32_t x = FloatBits(f);
  const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
  const uint32_t ax = x & 0x7fffffffu;
  if (ax >= 0x7f800000u) return sign | (ax > 0x7f800000u ? 0x7e00u : 0x7c00u);
  if (ax >= 0x477ff000u) return sign | 0x7c00u;  // >= 65520 rounds to infinity
  if (ax < 0x38800000u) {                        // below 2^-14: subnormal or zero
    // Scaling by 2^24 is exact; the rounded integer is the subnormal mantissa (1024 is
    // the smallest normal, whose encoding is that same integer).
    return sign | static_cast<uint16_t>(RoundHalfEven(BitsFloat(ax) * 16777216.0f));
  }
  const uint32_t mant = ax & 0x7fffffu;
  uint32_t half = ((((ax >> 23) - 127u + 15u) & 0x1fu) << 10) | (mant >> 13);
  const uint32_t rest = mant & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (half & 1u))) ++half;  // carries into the exponent
  return sign | static_cast<uint16_t>(half);
}

inline float HalfToFloat(uint16_t h) noexcept {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  const uint32_t mant = h & 0x3ffu;
  if (exp == 0) {
    const float magnitude = static_cast<float>(mant) * 5.9604644775390625e-8f;  // 2^-24
    return BitsFloat(sign | FloatBits(magnitude));
  }
  if (exp == 31) return BitsFloat(sign | 0x7f800000u | (mant << 13));
  return BitsFloat(sign | ((exp + 112u) << 23) | (mant << 13));
}

// bfloat16: the upper half of a float, rounded to nearest even; NaN kept quiet.
inline uint16_t FloatToBf16(float f) noexcept {
  const uint32_t x = FloatBits(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);
  return static_cast<uint16_t>((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

inline float Bf16ToFloat(uint16_t b) noexcept { return BitsFloat(static_cast<uint32_t>(b) << 16); }

// fp8 with kExp exponent bits, kMan mantissa bits and bias kBias, converted with
// saturation to the largest finite value (CUDA's __NV_SATFINITE, which NCCL's fp8
// reductions use). kMaxCode is the encoding of that largest finite magnitude, kNanCode
// the encoding used for NaN.
template <int kMan, int kBias, uint8_t kMaxCode, uint8_t kNanCode>
inline uint8_t FloatToFp8(float f, float max_finite, float subnormal_scale) noexcept {
  const uint32_t x = FloatBits(f);
  const uint8_t sign = static_cast<uint8_t>((x >> 24) & 0x80u);
  const uint32_t ax = x & 0x7fffffffu;
  if (ax > 0x7f800000u) return sign | kNanCode;
  const float a = BitsFloat(ax);
  if (a >= max_finite) return sign | kMaxCode;  // includes infinity
  const uint32_t min_normal_bits = static_cast<uint32_t>(127 + 1 - kBias) << 23;
  if (ax < min_normal_bits) {
    // Exact scaling puts the subnormal quantum at 1; the result may reach 2^kMan, which is
    // the encoding of the smallest normal.
    return sign | static_cast<uint8_t>(RoundHalfEven(a * subnormal_scale));
  }
  constexpr int kShift = 23 - kMan;
  const uint32_t mant = ax & 0x7fffffu;
  uint32_t code = ((((ax >> 23) - 127u + kBias)) << kMan) | (mant >> kShift);
  const uint32_t rest = mant & ((1u << kShift) - 1u);
  const uint32_t tie = 1u << (kShift - 1);
  if (rest > tie || (rest == tie && (code & 1u))) ++code;
  if (code > kMaxCode) code = kMaxCode;
  return sign | static_cast<uint8_t>(code);
}

// e4m3 ("fn"): bias 7, no infinity, S.1111.111 is NaN, largest finite 448 (0x7e).
inline uint8_t FloatToE4M3(float f) noexcept {
  return FloatToFp8<3, 7, 0x7e, 0x7f>(f, 448.0f, 512.0f);
}

inline float E4M3ToFloat(uint8_t v) noexcept {
  const uint32_t sign = static_cast<uint32_t>(v & 0x80u) << 24;
  const uint32_t exp = (v >> 3) & 0xfu;
  const uint32_t mant = v & 0x7u;
  if (exp == 15 && mant == 7) return BitsFloat(sign | 0x7fc00000u);
  if (exp == 0) return BitsFloat(sign | FloatBits(static_cast<float>(mant) * 0.001953125f));
  return BitsFloat(sign | ((exp + 120u) << 23) | (mant << 20));
}

// e5m2: bias 15, IEEE-like (exponent 31 is infinity/NaN), largest finite 57344 (0x7b).
inline uint8_t FloatToE5M2(float f) noexcept {
  return FloatToFp8<2, 15, 0x7b, 0x7f>(f, 57344.0f, 65536.0f);
}

inline float E5M2ToFloat(uint8_t v) noexcept {
  const uint32_t sign = static_cast<uint32_t>(v & 0x80u) << 24;
  const uint32_t exp = (v >> 2) & 0x1fu;
  const uint32_t mant = v & 0x3u;
  if (exp == 31) return BitsFloat(sign | 0x7f800000u | (mant << 21));
  if (exp == 0) return BitsFloat(sign | FloatBits(static_cast<float>(mant) * 1.52587890625e-05f));
  return BitsFloat(sign | ((exp + 112u) << 23) | (mant << 21));
}

}  // namespace collwatch::cpu_nccl

#endif  // COLLWATCH_CPU_NCCL_FLOAT_CONVERT_H_
