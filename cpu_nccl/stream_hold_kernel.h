// The one GPU kernel of the CUDA mode, as PTX text the driver compiles at load time (no
// nvcc at build time). One thread: it publishes `token` in *ready (so the host knows that
// everything before it on the stream, the input copies included, has completed), then
// waits until *release has reached `token`, holding back the rest of its stream (the
// output copies and whatever the program queued after the collective). Both words live in
// pinned host memory. Waiting in a kernel, not in a host callback: the driver runs a
// process's host callbacks one at a time, so one waiting collective would stall every
// other stream; a spinning one-thread kernel holds only its own stream.
// Threading: n/a (constant data).
#ifndef COLLWATCH_CPU_NCCL_STREAM_HOLD_KERNEL_H_
#define COLLWATCH_CPU_NCCL_STREAM_HOLD_KERNEL_H_

namespace collwatch::cpu_nccl {

inline constexpr char kStreamHoldKernelName[] = "collwatch_hold_stream";

// sm_70 and PTX 7.0: the oldest target with nanosleep; the driver JITs it for newer GPUs.
// Tokens wrap: "reached" is a signed 32-bit difference >= 0. Volatile accesses are
// relaxed system-scope accesses on sm_70+; the fences order them against the copies.
inline constexpr char kStreamHoldPtx[] = R"(
.version 7.0
.target sm_70
.address_size 64

.visible .entry collwatch_hold_stream(
    .param .u64 ready_address,
    .param .u64 release_address,
    .param .u32 token)
{
    .reg .pred %p<2>;
    .reg .b32 %r<4>;
    .reg .b64 %rd<3>;

    ld.param.u64 %rd1, [ready_address];
    ld.param.u64 %rd2, [release_address];
    ld.param.u32 %r1, [token];
    fence.sc.sys;
    st.volatile.u32 [%rd1], %r1;
WAIT:
    ld.volatile.u32 %r2, [%rd2];
    sub.s32 %r3, %r2, %r1;
    setp.ge.s32 %p1, %r3, 0;
    @%p1 bra DONE;
    nanosleep.u32 256;
    bra WAIT;
DONE:
    fence.sc.sys;
    ret;
}
)";

}  // namespace collwatch::cpu_nccl

#endif  // COLLWATCH_CPU_NCCL_STREAM_HOLD_KERNEL_H_
