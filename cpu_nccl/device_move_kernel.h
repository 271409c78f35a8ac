// The CUDA mode's data-moving kernels (COLLWATCH_CPU_NCCL_IPC), as PTX text the driver
// compiles at load time. On the collective's own stream: a hold kernel that, once
// released, fetches the job the progress thread has written into pinned host memory into
// device memory, then the move kernel, which does what the job says: nothing, copies, or
// a sum in rank order. So the addresses (peers' buffers, known only once every rank has
// reached the collective) need not be known at enqueue time, and no other stream is
// involved: the held stream never waits for work queued elsewhere (a second stream may
// share a hardware queue with work that waits for the held one, which hung an FSDP2 job).
// One thread fetches the job: host memory read by every block of the move kernel cost
// 12-14 ms per kernel on an H100 (the reads over PCIe serialise).
// Threading: n/a (constant data and a plain struct).
#ifndef COLLWATCH_CPU_NCCL_DEVICE_MOVE_KERNEL_H_
#define COLLWATCH_CPU_NCCL_DEVICE_MOVE_KERNEL_H_

#include <cstddef>
#include <cstdint>

namespace collwatch::cpu_nccl {

inline constexpr int kMaxMoveSources = 8;

enum class MoveKind : uint32_t {
  kNone = 0,     // released without work (an abort, a mismatch, the other path)
  kCopy16 = 1,   // copies in 16-byte units: every address, count and stride 16-aligned
  kCopy1 = 2,    // copies byte by byte
  kSumF32 = 3,   // out[i] = source0[i] + source1[i] + ..., float32, in rank order
  kSumBf16 = 4,  // likewise on bfloat16, summed in float and rounded once (nearest even)
};

// One job: written by the progress thread in pinned host memory, fetched into device
// memory by the hold kernel in front of the move kernel (12 words; the move kernel copies
// them to shared memory once per block). Copies: source k's `count` bytes go to
// out + k * out_stride. Sums: `count` elements of every source summed into out.
struct DeviceMoveJob {
  MoveKind kind;
  uint32_t nsources;
  uint64_t count;
  uint64_t out;
  uint64_t out_stride;
  uint64_t sources[kMaxMoveSources];
};
static_assert(sizeof(DeviceMoveJob) == 96 && offsetof(DeviceMoveJob, sources) == 32);
static_assert(alignof(DeviceMoveJob) == 8);  // fetched in 16-byte units: keep arrays 16-aligned

inline constexpr char kMoveKernelName[] = "collwatch_move";
inline constexpr char kHoldThenFetchKernelName[] = "collwatch_hold_then_fetch";
inline constexpr unsigned kMoveThreadsPerBlock = 256;
inline constexpr unsigned kMaxMoveBlocks = 1024;

// sm_70 and PTX 7.0 (the driver JITs it for newer GPUs). collwatch_hold_then_fetch is the
// stream-hold kernel (stream_hold_kernel.h) followed by a copy of the 96-byte job, in six
// independent 16-byte volatile loads. In collwatch_move, thread 0 of each block loads the
// job; every thread then reads it from shared memory.
// A grid-stride loop per source (copies) or over the elements (sums). bf16 widens by a
// 16-bit shift and narrows with round-to-nearest-even on the bits, NaN kept quiet.
inline constexpr char kMovePtx[] = R"(
.version 7.0
.target sm_70
.address_size 64

.visible .entry collwatch_hold_then_fetch(
    .param .u64 ready_address,
    .param .u64 release_address,
    .param .u32 token,
    .param .u64 job_from,
    .param .u64 job_to)
{
    .reg .pred %p<2>;
    .reg .b32 %r<4>;
    .reg .b64 %rd<20>;

    ld.param.u64 %rd1, [ready_address];
    ld.param.u64 %rd2, [release_address];
    ld.param.u32 %r1, [token];
    ld.param.u64 %rd3, [job_from];
    ld.param.u64 %rd4, [job_to];
    fence.sc.sys;
    st.volatile.u32 [%rd1], %r1;
WAIT:
    ld.volatile.u32 %r2, [%rd2];
    sub.s32 %r3, %r2, %r1;
    setp.ge.s32 %p1, %r3, 0;
    @%p1 bra FETCH;
    nanosleep.u32 256;
    bra WAIT;
FETCH:
    fence.sc.sys;
    ld.volatile.global.v2.u64 {%rd5, %rd6}, [%rd3+0];
    ld.volatile.global.v2.u64 {%rd7, %rd8}, [%rd3+16];
    ld.volatile.global.v2.u64 {%rd9, %rd10}, [%rd3+32];
    ld.volatile.global.v2.u64 {%rd11, %rd12}, [%rd3+48];
    ld.volatile.global.v2.u64 {%rd13, %rd14}, [%rd3+64];
    ld.volatile.global.v2.u64 {%rd15, %rd16}, [%rd3+80];
    st.global.v2.u64 [%rd4+0], {%rd5, %rd6};
    st.global.v2.u64 [%rd4+16], {%rd7, %rd8};
    st.global.v2.u64 [%rd4+32], {%rd9, %rd10};
    st.global.v2.u64 [%rd4+48], {%rd11, %rd12};
    st.global.v2.u64 [%rd4+64], {%rd13, %rd14};
    st.global.v2.u64 [%rd4+80], {%rd15, %rd16};
    ret;
}

.visible .entry collwatch_move(
    .param .u64 job_address)
{
    .shared .align 8 .b64 job[12];
    .reg .pred %p<8>;
    .reg .b16 %h<2>;
    .reg .b32 %r<24>;
    .reg .f32 %f<4>;
    .reg .b64 %rd<24>;

    ld.param.u64 %rd1, [job_address];
    mov.u32 %r1, %tid.x;
    setp.ne.u32 %p1, %r1, 0;
    @%p1 bra LOADED;
    ld.volatile.global.u64 %rd2, [%rd1+0];
    st.shared.u64 [job+0], %rd2;
    ld.volatile.global.u64 %rd2, [%rd1+8];
    st.shared.u64 [job+8], %rd2;
    ld.volatile.global.u64 %rd2, [%rd1+16];
    st.shared.u64 [job+16], %rd2;
    ld.volatile.global.u64 %rd2, [%rd1+24];
    st.shared.u64 [job+24], %rd2;
    ld.volatile.global.u64 %rd2, [%rd1+32];
    st.shared.u64 [job+32], %rd2;
    ld.volatile.global.u64 %rd2, [%rd1+40];
    st.shared.u64 [job+40], %rd2;
    ld.volatile.global.u64 %rd2, [%rd1+48];
    st.shared.u64 [job+48], %rd2;
    ld.volatile.global.u64 %rd2, [%rd1+56];
    st.shared.u64 [job+56], %rd2;
    ld.volatile.global.u64 %rd2, [%rd1+64];
    st.shared.u64 [job+64], %rd2;
    ld.volatile.global.u64 %rd2, [%rd1+72];
    st.shared.u64 [job+72], %rd2;
    ld.volatile.global.u64 %rd2, [%rd1+80];
    st.shared.u64 [job+80], %rd2;
    ld.volatile.global.u64 %rd2, [%rd1+88];
    st.shared.u64 [job+88], %rd2;
LOADED:
    bar.sync 0;
    ld.shared.u32 %r2, [job+0];
    ld.shared.u32 %r3, [job+4];
    ld.shared.u64 %rd3, [job+8];
    ld.shared.u64 %rd4, [job+16];
    ld.shared.u64 %rd5, [job+24];
    mov.u32 %r20, job;
    add.u32 %r20, %r20, 32;
    mov.u32 %r4, %ctaid.x;
    mov.u32 %r5, %ntid.x;
    mov.u32 %r6, %nctaid.x;
    mul.wide.u32 %rd6, %r4, %r5;
    cvt.u64.u32 %rd7, %r1;
    add.u64 %rd6, %rd6, %rd7;
    mul.wide.u32 %rd8, %r6, %r5;
    setp.eq.u32 %p2, %r2, 1;
    @%p2 bra COPY;
    setp.eq.u32 %p2, %r2, 2;
    @%p2 bra COPY;
    setp.eq.u32 %p2, %r2, 3;
    @%p2 bra SUM;
    setp.eq.u32 %p2, %r2, 4;
    @%p2 bra SUM;
    bra DONE;

COPY:
    setp.eq.u32 %p3, %r2, 1;
    mov.u64 %rd9, %rd3;
    @%p3 shr.u64 %rd9, %rd3, 4;
    mov.u32 %r7, 0;
COPY_SOURCE:
    setp.ge.u32 %p4, %r7, %r3;
    @%p4 bra DONE;
    shl.b32 %r8, %r7, 3;
    add.u32 %r8, %r8, %r20;
    ld.shared.u64 %rd10, [%r8];
    cvt.u64.u32 %rd11, %r7;
    mul.lo.u64 %rd11, %rd11, %rd5;
    add.u64 %rd11, %rd11, %rd4;
    mov.u64 %rd12, %rd6;
COPY_LOOP:
    setp.ge.u64 %p5, %rd12, %rd9;
    @%p5 bra COPY_NEXT;
    @!%p3 bra COPY_BYTE;
    shl.b64 %rd13, %rd12, 4;
    add.u64 %rd14, %rd10, %rd13;
    ld.global.v4.u32 {%r9, %r10, %r11, %r12}, [%rd14];
    add.u64 %rd15, %rd11, %rd13;
    st.global.v4.u32 [%rd15], {%r9, %r10, %r11, %r12};
    bra COPY_STEP;
COPY_BYTE:
    add.u64 %rd14, %rd10, %rd12;
    ld.global.u8 %h1, [%rd14];
    add.u64 %rd15, %rd11, %rd12;
    st.global.u8 [%rd15], %h1;
COPY_STEP:
    add.u64 %rd12, %rd12, %rd8;
    bra COPY_LOOP;
COPY_NEXT:
    add.u32 %r7, %r7, 1;
    bra COPY_SOURCE;

SUM:
    setp.eq.u32 %p3, %r2, 4;
    selp.u32 %r13, 1, 2, %p3;
    mov.u64 %rd12, %rd6;
SUM_LOOP:
    setp.ge.u64 %p5, %rd12, %rd3;
    @%p5 bra DONE;
    shl.b64 %rd13, %rd12, %r13;
    mov.u32 %r7, 0;
SUM_SOURCE:
    shl.b32 %r8, %r7, 3;
    add.u32 %r8, %r8, %r20;
    ld.shared.u64 %rd10, [%r8];
    add.u64 %rd14, %rd10, %rd13;
    @%p3 bra SUM_LOAD_BF16;
    ld.global.f32 %f2, [%rd14];
    bra SUM_ADD;
SUM_LOAD_BF16:
    ld.global.b16 %h1, [%rd14];
    cvt.u32.u16 %r14, %h1;
    shl.b32 %r14, %r14, 16;
    mov.b32 %f2, %r14;
SUM_ADD:
    setp.eq.u32 %p6, %r7, 0;
    @%p6 mov.f32 %f1, %f2;
    @!%p6 add.rn.f32 %f1, %f1, %f2;
    add.u32 %r7, %r7, 1;
    setp.lt.u32 %p7, %r7, %r3;
    @%p7 bra SUM_SOURCE;
    add.u64 %rd15, %rd4, %rd13;
    @%p3 bra SUM_STORE_BF16;
    st.global.f32 [%rd15], %f1;
    bra SUM_STEP;
SUM_STORE_BF16:
    mov.b32 %r15, %f1;
    shr.u32 %r16, %r15, 16;
    and.b32 %r16, %r16, 1;
    add.u32 %r16, %r16, 32767;
    add.u32 %r17, %r15, %r16;
    shr.u32 %r17, %r17, 16;
    testp.notanumber.f32 %p6, %f1;
    shr.u32 %r18, %r15, 16;
    or.b32 %r18, %r18, 64;
    selp.b32 %r17, %r18, %r17, %p6;
    cvt.u16.u32 %h1, %r17;
    st.global.b16 [%rd15], %h1;
SUM_STEP:
    add.u64 %rd12, %rd12, %rd8;
    bra SUM_LOOP;

DONE:
    ret;
}
)";

}  // namespace collwatch::cpu_nccl

#endif  // COLLWATCH_CPU_NCCL_DEVICE_MOVE_KERNEL_H_
