// Unit tests of the software float conversions and element kernels, against NVIDIA's own
// host implementations in cuda_fp16.h / cuda_bf16.h / cuda_fp8.h (pulled in by nccl.h).
// Threading: single-threaded tests.
#include "cpu_nccl/float_convert.h"

#include <gtest/gtest.h>
#include <nccl.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "cpu_nccl/reduce_kernels.h"
#include "ring/hash.h"

namespace collwatch::cpu_nccl {
namespace {

uint16_t NvHalfBits(float f) {
  const __half h = __float2half(f);
  uint16_t bits;
  std::memcpy(&bits, &h, sizeof bits);
  return bits;
}

float NvHalfToFloat(uint16_t bits) {
  __half h;
  std::memcpy(static_cast<void*>(&h), &bits, sizeof bits);
  return __half2float(h);
}

uint16_t NvBf16Bits(float f) {
  const __nv_bfloat16 b = __float2bfloat16(f);
  uint16_t bits;
  std::memcpy(&bits, &b, sizeof bits);
  return bits;
}

float NvFp8ToFloat(uint8_t v, __nv_fp8_interpretation_t kind) {
  const __half_raw raw = __nv_cvt_fp8_to_halfraw(v, kind);
  return __half2float(__half(raw));
}

// Floats that exercise rounding: every half/bf16 value and its neighbours and midpoints,
// plus pseudo-random bit patterns over the whole range.
std::vector<float> ProbeFloats() {
  std::vector<float> out;
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const float f = HalfToFloat(static_cast<uint16_t>(h));
    const float next = HalfToFloat(static_cast<uint16_t>(h + 1));
    out.push_back(f);
    out.push_back(std::nextafter(f, 0.0f));
    out.push_back(std::nextafter(f, INFINITY));
    if (std::isfinite(f) && std::isfinite(next)) out.push_back(f + (next - f) / 2);
    out.push_back(BitsFloat(h << 16));
    out.push_back(BitsFloat((h << 16) | 0x8000u));
  }
  for (uint64_t i = 0; i < (1u << 18); ++i) out.push_back(BitsFloat(static_cast<uint32_t>(Mix64(i))));
  return out;
}

bool SameOrBothNan(float a, float b) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b);
  return FloatBits(a) == FloatBits(b);
}

TEST(CpuNcclFloatConvert, HalfDecodesEveryPattern) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const auto bits = static_cast<uint16_t>(h);
    ASSERT_TRUE(SameOrBothNan(HalfToFloat(bits), NvHalfToFloat(bits))) << std::hex << h;
  }
}

TEST(CpuNcclFloatConvert, HalfEncodesLikeCuda) {
  for (float f : ProbeFloats()) {
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(HalfToFloat(FloatToHalf(f))));
      continue;
    }
    ASSERT_EQ(FloatToHalf(f), NvHalfBits(f)) << f;
  }
}

TEST(CpuNcclFloatConvert, Bf16EncodesLikeCuda) {
  for (float f : ProbeFloats()) {
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(Bf16ToFloat(FloatToBf16(f))));
      continue;
    }
    ASSERT_EQ(FloatToBf16(f), NvBf16Bits(f)) << f;
  }
}

TEST(CpuNcclFloatConvert, Fp8DecodesEveryPattern) {
  for (uint32_t v = 0; v < 256; ++v) {
    const auto b = static_cast<uint8_t>(v);
    ASSERT_TRUE(SameOrBothNan(E4M3ToFloat(b), NvFp8ToFloat(b, __NV_E4M3))) << v;
    ASSERT_TRUE(SameOrBothNan(E5M2ToFloat(b), NvFp8ToFloat(b, __NV_E5M2))) << v;
  }
}

TEST(CpuNcclFloatConvert, Fp8EncodesLikeCudaSatFinite) {
  for (float f : ProbeFloats()) {
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(E4M3ToFloat(FloatToE4M3(f))));
      EXPECT_TRUE(std::isnan(E5M2ToFloat(FloatToE5M2(f))));
      continue;
    }
    ASSERT_EQ(FloatToE4M3(f), __nv_cvt_float_to_fp8(f, __NV_SATFINITE, __NV_E4M3)) << f;
    ASSERT_EQ(FloatToE5M2(f), __nv_cvt_float_to_fp8(f, __NV_SATFINITE, __NV_E5M2)) << f;
  }
}

TEST(CpuNcclReduceKernels, ReducesInRankOrderAndAllowsAliasing) {
  // (1 + 1e8) + -1e8 is 0 in float, 1 + (1e8 + -1e8) is 1: the order is observable.
  std::vector<float> a(1000, 1.0f), b(1000, 1e8f), c(1000, -1e8f);
  const void* srcs[3] = {a.data(), b.data(), c.data()};
  GetReduceFn(ncclFloat32, BaseOp::kSum)(b.data(), srcs, 3, b.size(), 0);  // dst aliases b
  for (float v : b) ASSERT_EQ(v, 0.0f);

  std::vector<int32_t> x(777, INT32_MAX), y(777, 3);
  const void* isrcs[2] = {x.data(), y.data()};
  std::vector<int32_t> out(777);
  GetReduceFn(ncclInt32, BaseOp::kSum)(out.data(), isrcs, 2, out.size(), 2);  // wraps, then /2
  for (int32_t v : out) ASSERT_EQ(v, (INT32_MIN + 2) / 2);
  GetReduceFn(ncclInt32, BaseOp::kMin)(out.data(), isrcs, 2, out.size(), 0);
  for (int32_t v : out) ASSERT_EQ(v, 3);
}

TEST(CpuNcclReduceKernels, HalfSumsAccumulateInFloatAndRoundOnce) {
  // 2048 + 1 + 1 in fp16: stepwise rounding gives 2048, one rounding gives 2050.
  const uint16_t big = FloatToHalf(2048.0f), one = FloatToHalf(1.0f);
  std::vector<uint16_t> s0(300, big), s1(300, one), s2(300, one), out(300);
  const void* srcs[3] = {s0.data(), s1.data(), s2.data()};
  GetReduceFn(ncclFloat16, BaseOp::kSum)(out.data(), srcs, 3, out.size(), 0);
  for (uint16_t v : out) ASSERT_EQ(HalfToFloat(v), 2050.0f);
}

TEST(CpuNcclReduceKernels, ScaleUsesTheScalarOfTheElementType) {
  std::vector<uint16_t> in(100, FloatToBf16(3.0f)), out(100);
  GetScaleFn(ncclBfloat16)(out.data(), in.data(), in.size(), ReciprocalBits(ncclBfloat16, 3));
  const float want = Bf16ToFloat(FloatToBf16(3.0f * Bf16ToFloat(FloatToBf16(1.0f / 3.0f))));
  for (uint16_t v : out) ASSERT_EQ(Bf16ToFloat(v), want);
}

}  // namespace
}  // namespace collwatch::cpu_nccl
