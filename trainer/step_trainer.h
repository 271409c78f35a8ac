// What RunTraining (zero3_trainer.h) drives, whichever parallelism splits the model:
// ZeRO-3 (zero3_trainer_internal.h) or a pipeline of stages (pipeline_trainer.h).
// Threading: one training thread per process.
#ifndef COLLWATCH_TRAINER_STEP_TRAINER_H_
#define COLLWATCH_TRAINER_STEP_TRAINER_H_

#include <cstdint>
#include <string>

namespace collwatch::trainer {

class StepTrainer {
 public:
  virtual ~StepTrainer() = default;
  // One training step; returns this rank's loss (NaN where the rank computes none).
  virtual double Step(int64_t step) = 0;
  // The whole model's parameters (every rank, every stage).
  virtual int64_t ParameterCount(bool trainable_only) const = 0;
  // Rank 0's line after step 0 (empty: none).
  virtual std::string FirstStepNote() const { return ""; }
  // Writes every unit's parameters and last gradients (--dump-params); false on failure.
  virtual bool DumpParams(const std::string& path) = 0;
};

}  // namespace collwatch::trainer

#endif  // COLLWATCH_TRAINER_STEP_TRAINER_H_
