// Writes the PTX of device_reduce_ptx.h. Per element: load source 0, add sources 1..n-1
// in order, store; a grid-stride loop over the elements. bf16 widens by a 16-bit shift and
// narrows with round-to-nearest-even on the bits (NaN kept quiet), so any sm_70+ GPU runs it.
// Threading: pure function.
#include "cpu_nccl/device_reduce_ptx.h"

#include <cstdarg>
#include <cstdio>

namespace collwatch::cpu_nccl {
namespace {

// Appends to out[*used..capacity); false once it does not fit.
bool Append(char* out, size_t capacity, size_t* used, const char* format, ...) noexcept
    __attribute__((format(printf, 4, 5)));

bool Append(char* out, size_t capacity, size_t* used, const char* format, ...) noexcept {
  if (*used >= capacity) return false;
  va_list args;
  va_start(args, format);
  const int n = std::vsnprintf(out + *used, capacity - *used, format, args);
  va_end(args);
  if (n < 0 || static_cast<size_t>(n) >= capacity - *used) {
    *used = capacity;
    return false;
  }
  *used += static_cast<size_t>(n);
  return true;
}

// One kernel. `bf16`: 2-byte elements widened to float; else float32.
bool AppendSumKernel(char* out, size_t capacity, size_t* used, const char* name,
                     bool bf16) noexcept {
  bool ok = Append(out, capacity, used,
                   ".visible .entry %s(\n"
                   "    .param .u64 out,\n",
                   name);
  for (int k = 0; k < kMaxDeviceReduceSources; ++k) {
    ok = ok && Append(out, capacity, used, "    .param .u64 source%d,\n", k);
  }
  ok = ok && Append(out, capacity, used,
                    "    .param .u32 nsources,\n"
                    "    .param .u64 count)\n"
                    "{\n"
                    "    .reg .pred %%p<4>;\n"
                    "    .reg .b32 %%r<16>;\n"
                    "    .reg .b16 %%h<2>;\n"
                    "    .reg .f32 %%f<4>;\n"
                    "    .reg .b64 %%rd<32>;\n"
                    "    ld.param.u64 %%rd1, [out];\n");
  for (int k = 0; k < kMaxDeviceReduceSources; ++k) {
    ok = ok && Append(out, capacity, used, "    ld.param.u64 %%rd%d, [source%d];\n", 10 + k, k);
  }
  // rd2 = index, rd3 = stride, rd4 = count, rd5 = byte offset, rd6 = address.
  ok = ok && Append(out, capacity, used,
                    "    ld.param.u32 %%r1, [nsources];\n"
                    "    ld.param.u64 %%rd4, [count];\n"
                    "    mov.u32 %%r2, %%ctaid.x;\n"
                    "    mov.u32 %%r3, %%ntid.x;\n"
                    "    mov.u32 %%r4, %%tid.x;\n"
                    "    mov.u32 %%r5, %%nctaid.x;\n"
                    "    mul.wide.u32 %%rd2, %%r2, %%r3;\n"
                    "    cvt.u64.u32 %%rd7, %%r4;\n"
                    "    add.u64 %%rd2, %%rd2, %%rd7;\n"
                    "    mul.wide.u32 %%rd3, %%r5, %%r3;\n"
                    "LOOP:\n"
                    "    setp.ge.u64 %%p1, %%rd2, %%rd4;\n"
                    "    @%%p1 bra END;\n"
                    "    shl.b64 %%rd5, %%rd2, %d;\n",
                    bf16 ? 1 : 2);
  for (int k = 0; k < kMaxDeviceReduceSources; ++k) {
    if (k > 0) {
      ok = ok && Append(out, capacity, used,
                        "    setp.le.u32 %%p2, %%r1, %d;\n"
                        "    @%%p2 bra STORE;\n",
                        k);
    }
    ok = ok && Append(out, capacity, used, "    add.u64 %%rd6, %%rd%d, %%rd5;\n", 10 + k);
    if (bf16) {
      ok = ok && Append(out, capacity, used,
                        "    ld.global.b16 %%h1, [%%rd6];\n"
                        "    cvt.u32.u16 %%r6, %%h1;\n"
                        "    shl.b32 %%r6, %%r6, 16;\n"
                        "    mov.b32 %%f2, %%r6;\n");
    } else {
      ok = ok && Append(out, capacity, used, "    ld.global.f32 %%f2, [%%rd6];\n");
    }
    ok = ok && Append(out, capacity, used,
                      k == 0 ? "    mov.f32 %%f1, %%f2;\n" : "    add.rn.f32 %%f1, %%f1, %%f2;\n");
  }
  ok = ok && Append(out, capacity, used,
                    "STORE:\n"
                    "    add.u64 %%rd6, %%rd1, %%rd5;\n");
  if (bf16) {
    // Round to nearest even on the bits: add 0x7fff plus the lowest kept bit; NaN stays a
    // quiet NaN with its sign.
    ok = ok && Append(out, capacity, used,
                      "    mov.b32 %%r7, %%f1;\n"
                      "    shr.u32 %%r8, %%r7, 16;\n"
                      "    and.b32 %%r8, %%r8, 1;\n"
                      "    add.u32 %%r8, %%r8, 32767;\n"
                      "    add.u32 %%r9, %%r7, %%r8;\n"
                      "    shr.u32 %%r9, %%r9, 16;\n"
                      "    testp.notanumber.f32 %%p3, %%f1;\n"
                      "    shr.u32 %%r10, %%r7, 16;\n"
                      "    or.b32 %%r10, %%r10, 64;\n"
                      "    selp.b32 %%r9, %%r10, %%r9, %%p3;\n"
                      "    cvt.u16.u32 %%h1, %%r9;\n"
                      "    st.global.b16 [%%rd6], %%h1;\n");
  } else {
    ok = ok && Append(out, capacity, used, "    st.global.f32 [%%rd6], %%f1;\n");
  }
  ok = ok && Append(out, capacity, used,
                    "    add.u64 %%rd2, %%rd2, %%rd3;\n"
                    "    bra LOOP;\n"
                    "END:\n"
                    "    ret;\n"
                    "}\n");
  return ok;
}

}  // namespace

bool BuildDeviceReducePtx(char* out, size_t capacity) noexcept {
  size_t used = 0;
  return Append(out, capacity, &used, ".version 7.0\n.target sm_70\n.address_size 64\n\n") &&
         AppendSumKernel(out, capacity, &used, kSumFloat32KernelName, false) &&
         AppendSumKernel(out, capacity, &used, kSumBfloat16KernelName, true);
}

}  // namespace collwatch::cpu_nccl
