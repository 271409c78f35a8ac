// Reference values written independently of the library: CUDA's host conversions for the
// narrow floats. Threading: pure functions.
#include "tests/cpu_nccl/reference.h"

#include <cstring>
#include <sstream>
#include <type_traits>

namespace collwatch::cpu_nccl_test {
namespace {

template <class T>
struct Native {
  using Storage = T;
  using Acc = T;
  static Acc Load(Storage v) { return v; }
  static Storage Store(Acc a) { return a; }
  static Storage FromDouble(double d) { return static_cast<T>(d); }
};

struct Half {
  using Storage = __half;
  using Acc = float;
  static Acc Load(Storage v) { return __half2float(v); }
  static Storage Store(Acc a) { return __float2half(a); }
  static Storage FromDouble(double d) { return __float2half(static_cast<float>(d)); }
};

struct Bf16 {
  using Storage = __nv_bfloat16;
  using Acc = float;
  static Acc Load(Storage v) { return __bfloat162float(v); }
  static Storage Store(Acc a) { return __float2bfloat16(a); }
  static Storage FromDouble(double d) { return __float2bfloat16(static_cast<float>(d)); }
};

template <__nv_fp8_interpretation_t kKind>
struct Fp8 {
  using Storage = __nv_fp8_storage_t;
  using Acc = float;
  static Acc Load(Storage v) { return __half2float(__half(__nv_cvt_fp8_to_halfraw(v, kKind))); }
  static Storage Store(Acc a) { return __nv_cvt_float_to_fp8(a, __NV_SATFINITE, kKind); }
  static Storage FromDouble(double d) { return Store(static_cast<float>(d)); }
};

template <class A>
A Combine(ncclRedOp_t op, A a, A b) {
  if constexpr (std::is_integral_v<A>) {
    using U = std::conditional_t<(sizeof(A) < sizeof(unsigned)), unsigned, std::make_unsigned_t<A>>;
    if (op == ncclProd) return static_cast<A>(static_cast<U>(a) * static_cast<U>(b));
    if (op == ncclMax) return a < b ? b : a;
    if (op == ncclMin) return b < a ? b : a;
    return static_cast<A>(static_cast<U>(a) + static_cast<U>(b));
  } else {
    if (op == ncclProd) return a * b;
    if (op == ncclMax) return a < b ? b : a;
    if (op == ncclMin) return b < a ? b : a;
    return a + b;
  }
}

template <class T>
std::vector<uint8_t> Reduce(ncclRedOp_t op, const std::vector<std::vector<uint8_t>>& inputs,
                            size_t offset, size_t count, const std::vector<uint64_t>& premul) {
  using S = typename T::Storage;
  using A = typename T::Acc;
  const int n = static_cast<int>(inputs.size());
  constexpr bool kFloating = !std::is_integral_v<A>;
  // Scalar per rank applied to the own input first (PreMulSum; floating Avg uses 1/n).
  std::vector<S> scalars(static_cast<size_t>(n));
  bool scale = false;
  if (op == static_cast<ncclRedOp_t>(ncclNumOps)) {
    scale = true;
    for (int r = 0; r < n; ++r) std::memcpy(static_cast<void*>(&scalars[r]), &premul[r], sizeof(S));
  } else if (op == ncclAvg && kFloating) {
    scale = true;
    for (int r = 0; r < n; ++r) scalars[r] = T::FromDouble(1.0 / n);
  }
  const ncclRedOp_t combine = (op == ncclAvg || scale) ? ncclSum : op;
  std::vector<uint8_t> out(count * sizeof(S));
  for (size_t i = 0; i < count; ++i) {
    A acc{};
    for (int r = 0; r < n; ++r) {
      S v;
      std::memcpy(&v, inputs[r].data() + (offset + i) * sizeof(S), sizeof(S));
      if (scale) v = T::Store(Combine<A>(ncclProd, T::Load(v), T::Load(scalars[r])));
      acc = r == 0 ? T::Load(v) : Combine<A>(combine, acc, T::Load(v));
    }
    if constexpr (!kFloating) {
      if (op == ncclAvg) {
        using Wide = std::conditional_t<std::is_signed_v<A>, int64_t, uint64_t>;
        acc = static_cast<A>(static_cast<Wide>(acc) / static_cast<Wide>(n));
      }
    }
    const S result = T::Store(acc);
    std::memcpy(out.data() + i * sizeof(S), &result, sizeof(S));
  }
  return out;
}

template <class T>
std::vector<uint8_t> Input(int rank, int salt, size_t count, size_t first) {
  using S = typename T::Storage;
  std::vector<uint8_t> out(count * sizeof(S));
  for (size_t i = 0; i < count; ++i) {
    const size_t index = first + i;
    const long k = static_cast<long>(
        (static_cast<size_t>(rank) * 7 + index * 13 + static_cast<size_t>(salt) * 5) % 15);
    double v;
    if constexpr (std::is_integral_v<typename T::Acc>) {
      v = static_cast<double>(k % 5) - (std::is_signed_v<typename T::Acc> ? 2.0 : 0.0);
    } else {
      v = static_cast<double>(k - 6) * 0.25;  // -1.5 .. 2, exact in every floating type
    }
    const S s = T::FromDouble(v);
    std::memcpy(out.data() + i * sizeof(S), &s, sizeof(S));
  }
  return out;
}

template <class T>
double ToDouble(const void* buf, size_t i) {
  typename T::Storage s;
  std::memcpy(&s, static_cast<const uint8_t*>(buf) + i * sizeof s, sizeof s);
  return static_cast<double>(T::Load(s));
}

// Calls f.template operator()<Traits>() for the traits of `type`.
template <class F>
auto Dispatch(ncclDataType_t type, F&& f) {
  switch (type) {
    case ncclInt8: return f.template operator()<Native<int8_t>>();
    case ncclUint8: return f.template operator()<Native<uint8_t>>();
    case ncclInt32: return f.template operator()<Native<int32_t>>();
    case ncclUint32: return f.template operator()<Native<uint32_t>>();
    case ncclInt64: return f.template operator()<Native<int64_t>>();
    case ncclUint64: return f.template operator()<Native<uint64_t>>();
    case ncclFloat16: return f.template operator()<Half>();
    case ncclFloat32: return f.template operator()<Native<float>>();
    case ncclFloat64: return f.template operator()<Native<double>>();
    case ncclBfloat16: return f.template operator()<Bf16>();
    case ncclFloat8e4m3: return f.template operator()<Fp8<__NV_E4M3>>();
    default: return f.template operator()<Fp8<__NV_E5M2>>();
  }
}

}  // namespace

size_t SizeOf(ncclDataType_t type) {
  for (const DtypeInfo& d : kAllDtypes) {
    if (d.type == type) return d.size;
  }
  return 0;
}

const char* OpName(ncclRedOp_t op) {
  switch (op) {
    case ncclSum: return "sum";
    case ncclProd: return "prod";
    case ncclMax: return "max";
    case ncclMin: return "min";
    case ncclAvg: return "avg";
    default: return "premulsum";
  }
}

std::vector<uint8_t> MakeInput(ncclDataType_t type, int rank, int salt, size_t count,
                               size_t first) {
  return Dispatch(type, [&]<class T>() { return Input<T>(rank, salt, count, first); });
}

uint64_t EncodeScalar(ncclDataType_t type, double value) {
  return Dispatch(type, [&]<class T>() {
    const typename T::Storage s = T::FromDouble(value);
    uint64_t bits = 0;
    std::memcpy(&bits, &s, sizeof s);
    return bits;
  });
}

std::vector<uint8_t> ReferenceReduce(ncclDataType_t type, ncclRedOp_t op,
                                     const std::vector<std::vector<uint8_t>>& inputs,
                                     size_t offset, size_t count,
                                     const std::vector<uint64_t>& premul) {
  return Dispatch(type, [&]<class T>() { return Reduce<T>(op, inputs, offset, count, premul); });
}

std::string FirstDifference(ncclDataType_t type, const void* got, const void* want, size_t count) {
  const size_t size = SizeOf(type);
  if (std::memcmp(got, want, size * count) == 0) return "";
  for (size_t i = 0; i < count; ++i) {
    const auto* g = static_cast<const uint8_t*>(got) + i * size;
    const auto* w = static_cast<const uint8_t*>(want) + i * size;
    if (std::memcmp(g, w, size) != 0) {
      std::ostringstream msg;
      Dispatch(type, [&]<class T>() {
        msg << "element " << i << " of " << count << ": got " << ToDouble<T>(got, i) << ", want "
            << ToDouble<T>(want, i);
        return 0;
      });
      return msg.str();
    }
  }
  return "";
}

}  // namespace collwatch::cpu_nccl_test
