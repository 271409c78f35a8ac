// Pipeline-parallel training (the pipeline scenarios, trainer/README.md): the VLM's units
// split into one stage per rank in forward order, as Megatron-LM splits layers over its
// pipeline ranks. The vision tower, projector and embedding sit on the first stage, the
// trunk blocks are spread over the stages, the experts, MTP heads and unembedding sit on
// the last. Each step runs a GPipe schedule over --microbatches microbatches: every
// microbatch's forward (receive its activations from the stage before, run, send them
// on), then every microbatch's backward in the same order (receive the gradient from the
// stage after, backward, send the input's gradient back). A stage holds its units whole
// and updates them with SGD. Threading: one training thread per process.
#ifndef COLLWATCH_TRAINER_PIPELINE_TRAINER_H_
#define COLLWATCH_TRAINER_PIPELINE_TRAINER_H_

#include <ATen/ATen.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "trainer/comm.h"
#include "trainer/data.h"
#include "trainer/launch.h"
#include "trainer/model.h"
#include "trainer/options.h"
#include "trainer/step_trainer.h"

namespace collwatch::trainer {

// The stage (rank) of `stages` that holds `unit`.
int StageOf(const UnitSpec& unit, const ModelOptions& model, int stages);

class PipelineTrainer final : public StepTrainer {
 public:
  PipelineTrainer(const TrainerOptions& options, const DistEnv& env, Communicator& comm, const at::Device& device);

  // The last stage's loss (mean over microbatches and MTP heads); NaN on the others.
  double Step(int64_t step) override;
  int64_t ParameterCount(bool trainable_only) const override;
  bool DumpParams(const std::string& path) override;

 private:
  struct StageUnit {
    UnitSpec spec;
    at::Tensor flat;  // the whole unit; requires grad when trainable
  };
  // What a microbatch's backward needs from its forward.
  struct Saved {
    at::Tensor input;   // the received activations (a leaf); undefined on the first stage
    at::Tensor output;  // the activations sent on, or the loss on the last stage
  };
  std::vector<at::Tensor> Weights(int index) const { return ParamViews(units_[index].spec, units_[index].flat); }
  int64_t MicrobatchesAt(int64_t step) const;
  Batch Microbatch(int64_t step, int64_t microbatch) const;
  Saved Forward(int64_t step, int64_t microbatch);
  void Backward(const Saved& saved);
  at::Tensor ActivationsLike() const;  // [batch, seq, hidden] float32 on the device

  const TrainerOptions& options_;
  const int stage_;
  const int stages_;
  Communicator& comm_;
  const at::Device device_;
  SyntheticData data_;  // one global stream of microbatches, the same on every stage
  std::vector<StageUnit> units_;  // this stage's, in forward order
  int64_t model_parameters_ = 0;
  int64_t model_trainable_ = 0;
};

}  // namespace collwatch::trainer

#endif  // COLLWATCH_TRAINER_PIPELINE_TRAINER_H_
