// The ZeRO-3 trainer object that zero3_shards.cc (the sharded parameters: build, gather,
// reduce-scatter, AdamW, dump) and zero3_step.cc (one step: forward, per-unit recompute
// backward, the MTP heads and the scenarios) define between them; zero3_trainer.cc drives
// it. Threading: one training thread per process.
#ifndef COLLWATCH_TRAINER_ZERO3_TRAINER_INTERNAL_H_
#define COLLWATCH_TRAINER_ZERO3_TRAINER_INTERNAL_H_

#include <ATen/ATen.h>

#include <cstdint>
#include <string>
#include <vector>

#include "trainer/comm.h"
#include "trainer/data.h"
#include "trainer/launch.h"
#include "trainer/model.h"
#include "trainer/options.h"
#include "trainer/step_trainer.h"

namespace collwatch::trainer {

// How the image features enter the token sequence this step.
enum class ImageMode {
  kNone,              // text-only batch, vision tower skipped (diverges across ranks)
  kMerge,             // image placeholders replaced by projected features
  kZeroContribution,  // text-only batch, dummy image run and multiplied by zero
};

enum class GatherFor { kForward, kForwardWithGrad, kRecompute };

struct ShardedUnit {
  UnitSpec spec;
  int64_t numel = 0;        // real elements
  int64_t shard_numel = 0;  // per rank; padded numel = shard_numel * world
  at::Tensor shard;         // this rank's slice, float32
  at::Tensor grad_shard;    // averaged gradient of the slice (trainable units)
  at::Tensor adam_m;
  at::Tensor adam_v;
  at::Tensor full;  // gathered flat parameters; undefined while freed
};

class Zero3Trainer final : public StepTrainer {
 public:
  Zero3Trainer(const TrainerOptions& options, const DistEnv& env, Communicator& comm,
               const at::Device& device);

  // One training step; returns this rank's loss (mean over the MTP heads).
  double Step(int64_t step) override;
  // Gathers every unit's parameters and last gradients; rank 0 writes them to `path`.
  bool DumpParams(const std::string& path) override;

  int64_t ParameterCount(bool trainable_only) const override;
  // The bytes of the first all-gather and of step 0's forward all-gathers.
  std::string FirstStepNote() const override;

 private:
  void Gather(ShardedUnit& unit, GatherFor purpose);
  std::vector<at::Tensor> Weights(const ShardedUnit& unit) const { return ParamViews(unit.spec, unit.full); }
  void ReduceScatterGrad(ShardedUnit& unit);
  void Free(ShardedUnit& unit) { unit.full = at::Tensor(); }

  BatchKind ChooseKind(int64_t step);
  at::Tensor Combine(const at::Tensor& embedded, const at::Tensor& projected) const;
  at::Tensor ExpertsUpdate(const at::Tensor& x);  // experts must be gathered
  at::Tensor ForwardBody(const Batch& batch);
  void BackwardBody(at::Tensor grad);
  void OptimizerStep(int64_t step);

  const TrainerOptions& options_;
  const int rank_;
  Communicator& comm_;
  const at::Device device_;
  SyntheticData data_;
  at::ScalarType reduce_dtype_ = at::kFloat;

  std::vector<ShardedUnit> units_;
  int vision_patch_ = -1;
  std::vector<int> vision_blocks_;
  int projector_ = -1;
  int embed_ = -1;
  std::vector<int> trunk_blocks_;
  std::vector<int> experts_;
  std::vector<int> heads_;
  int unembed_ = -1;

  // What the backward recomputes from, saved by the forward of the current step.
  ImageMode mode_ = ImageMode::kMerge;
  at::Tensor tokens_;
  at::Tensor domains_;
  at::Tensor vision_features_;
  std::vector<at::Tensor> block_inputs_;
  at::Tensor experts_input_;

  uint64_t first_gather_bytes_ = 0;
  uint64_t forward_gather_bytes_ = 0;  // of the current step
};

}  // namespace collwatch::trainer

#endif  // COLLWATCH_TRAINER_ZERO3_TRAINER_INTERNAL_H_
