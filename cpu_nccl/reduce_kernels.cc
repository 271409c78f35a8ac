// Element kernels: one template per (type, op), instantiated into dispatch tables.
// Threading: pure functions. Integer arithmetic wraps (done in unsigned types), as on GPUs.
#include "cpu_nccl/reduce_kernels.h"

#include <cstring>
#include <type_traits>

#include "cpu_nccl/float_convert.h"

namespace collwatch::cpu_nccl {
namespace {

// Storage type, accumulation type and the conversions between them.
template <class T>
struct NativeType {
  using Storage = T;
  using Acc = T;
  static Acc Load(Storage v) noexcept { return v; }
  static Storage Store(Acc a) noexcept { return a; }
};

struct HalfType {
  using Storage = uint16_t;
  using Acc = float;
  static Acc Load(Storage v) noexcept { return HalfToFloat(v); }
  static Storage Store(Acc a) noexcept { return FloatToHalf(a); }
};

struct Bf16Type {
  using Storage = uint16_t;
  using Acc = float;
  static Acc Load(Storage v) noexcept { return Bf16ToFloat(v); }
  static Storage Store(Acc a) noexcept { return FloatToBf16(a); }
};

struct E4M3Type {
  using Storage = uint8_t;
  using Acc = float;
  static Acc Load(Storage v) noexcept { return E4M3ToFloat(v); }
  static Storage Store(Acc a) noexcept { return FloatToE4M3(a); }
};

struct E5M2Type {
  using Storage = uint8_t;
  using Acc = float;
  static Acc Load(Storage v) noexcept { return E5M2ToFloat(v); }
  static Storage Store(Acc a) noexcept { return FloatToE5M2(a); }
};

// Unsigned type wide enough that integer promotion never makes the arithmetic signed.
template <class A>
using WrapType = std::conditional_t<(sizeof(A) < sizeof(unsigned)), unsigned,
                                    std::make_unsigned_t<A>>;

struct SumOp {
  template <class A>
  static A Apply(A a, A b) noexcept {
    if constexpr (std::is_integral_v<A>) {
      return static_cast<A>(static_cast<WrapType<A>>(a) + static_cast<WrapType<A>>(b));
    } else {
      return a + b;
    }
  }
};

struct ProdOp {
  template <class A>
  static A Apply(A a, A b) noexcept {
    if constexpr (std::is_integral_v<A>) {
      return static_cast<A>(static_cast<WrapType<A>>(a) * static_cast<WrapType<A>>(b));
    } else {
      return a * b;
    }
  }
};

struct MaxOp {
  template <class A>
  static A Apply(A a, A b) noexcept { return b > a ? b : a; }
};

struct MinOp {
  template <class A>
  static A Apply(A a, A b) noexcept { return b < a ? b : a; }
};

template <class T, class Op>
void ReduceKernel(void* dst, const void* const* srcs, int nsrcs, size_t count,
                  uint64_t postdiv) noexcept {
  using S = typename T::Storage;
  using A = typename T::Acc;
  constexpr size_t kBlock = 256;  // accumulators stay in L1; dst may alias a source
  A acc[kBlock];
  S* out = static_cast<S*>(dst);
  for (size_t base = 0; base < count; base += kBlock) {
    const size_t len = count - base < kBlock ? count - base : kBlock;
    const S* first = static_cast<const S*>(srcs[0]) + base;
    for (size_t j = 0; j < len; ++j) acc[j] = T::Load(first[j]);
    for (int k = 1; k < nsrcs; ++k) {
      const S* src = static_cast<const S*>(srcs[k]) + base;
      for (size_t j = 0; j < len; ++j) acc[j] = Op::Apply(acc[j], T::Load(src[j]));
    }
    if constexpr (std::is_integral_v<A>) {
      if (postdiv != 0) {
        using Wide = std::conditional_t<std::is_signed_v<A>, int64_t, uint64_t>;
        const Wide divisor = static_cast<Wide>(postdiv);
        for (size_t j = 0; j < len; ++j) {
          acc[j] = static_cast<A>(static_cast<Wide>(acc[j]) / divisor);
        }
      }
    }
    for (size_t j = 0; j < len; ++j) out[base + j] = T::Store(acc[j]);
  }
}

template <class T>
void ScaleKernel(void* dst, const void* src, size_t count, uint64_t scalar_bits) noexcept {
  using S = typename T::Storage;
  using A = typename T::Acc;
  S scalar_storage;
  std::memcpy(&scalar_storage, &scalar_bits, sizeof scalar_storage);
  const A scalar = T::Load(scalar_storage);
  const S* in = static_cast<const S*>(src);
  S* out = static_cast<S*>(dst);
  for (size_t i = 0; i < count; ++i) out[i] = T::Store(ProdOp::Apply(T::Load(in[i]), scalar));
}

template <class T>
constexpr ReduceFn kReduceRow[4] = {&ReduceKernel<T, SumOp>, &ReduceKernel<T, ProdOp>,
                                    &ReduceKernel<T, MaxOp>, &ReduceKernel<T, MinOp>};

// Rows in nccl.h's ncclDataType_t order.
constexpr const ReduceFn* kReduceTable[kNumDtypes] = {
    kReduceRow<NativeType<int8_t>>,   kReduceRow<NativeType<uint8_t>>,
    kReduceRow<NativeType<int32_t>>,  kReduceRow<NativeType<uint32_t>>,
    kReduceRow<NativeType<int64_t>>,  kReduceRow<NativeType<uint64_t>>,
    kReduceRow<HalfType>,             kReduceRow<NativeType<float>>,
    kReduceRow<NativeType<double>>,   kReduceRow<Bf16Type>,
    kReduceRow<E4M3Type>,             kReduceRow<E5M2Type>,
};

constexpr ScaleFn kScaleTable[kNumDtypes] = {
    &ScaleKernel<NativeType<int8_t>>,  &ScaleKernel<NativeType<uint8_t>>,
    &ScaleKernel<NativeType<int32_t>>, &ScaleKernel<NativeType<uint32_t>>,
    &ScaleKernel<NativeType<int64_t>>, &ScaleKernel<NativeType<uint64_t>>,
    &ScaleKernel<HalfType>,            &ScaleKernel<NativeType<float>>,
    &ScaleKernel<NativeType<double>>,  &ScaleKernel<Bf16Type>,
    &ScaleKernel<E4M3Type>,            &ScaleKernel<E5M2Type>,
};

constexpr size_t kSizes[kNumDtypes] = {1, 1, 4, 4, 8, 8, 2, 4, 8, 2, 1, 1};

}  // namespace

size_t DtypeSize(int dtype) noexcept {
  return dtype >= 0 && dtype < kNumDtypes ? kSizes[dtype] : 0;
}

bool IsFloatingDtype(int dtype) noexcept { return dtype >= 6 && dtype < kNumDtypes; }

ReduceFn GetReduceFn(int dtype, BaseOp op) noexcept {
  if (dtype < 0 || dtype >= kNumDtypes) return nullptr;
  return kReduceTable[dtype][static_cast<int>(op)];
}

ScaleFn GetScaleFn(int dtype) noexcept {
  return dtype >= 0 && dtype < kNumDtypes ? kScaleTable[dtype] : nullptr;
}

uint64_t ReciprocalBits(int dtype, int n) noexcept {
  const double r = 1.0 / static_cast<double>(n);
  uint64_t bits = 0;
  switch (dtype) {
    case 6: bits = FloatToHalf(static_cast<float>(r)); break;
    case 7: {
      const float f = static_cast<float>(r);
      std::memcpy(&bits, &f, sizeof f);
      break;
    }
    case 8: std::memcpy(&bits, &r, sizeof r); break;
    case 9: bits = FloatToBf16(static_cast<float>(r)); break;
    case 10: bits = FloatToE4M3(static_cast<float>(r)); break;
    case 11: bits = FloatToE5M2(static_cast<float>(r)); break;
    default: break;
  }
  return bits;
}

}  // namespace collwatch::cpu_nccl
