// ZeRO-3 training on the NCCL C API: every unit's parameters live as a flat shard per rank,
// all-gathered just before the unit runs (forward, and again to recompute it in the
// backward), freed after; gradients are reduce-scattered (averaged) to the shards and an
// AdamW of our own updates only the local shard. The scenarios (trainer/README.md) change what
// a rank does here. Threading: one training thread per process.
#ifndef COLLWATCH_TRAINER_ZERO3_TRAINER_H_
#define COLLWATCH_TRAINER_ZERO3_TRAINER_H_

#include "trainer/launch.h"
#include "trainer/options.h"

namespace collwatch::trainer {

// Trains for options.steps steps as rank env.rank of env.world_size; prints one
// "rank R step S loss L" line per step. Returns the process exit code.
int RunTraining(const TrainerOptions& options, const DistEnv& env);

}  // namespace collwatch::trainer

#endif  // COLLWATCH_TRAINER_ZERO3_TRAINER_H_
