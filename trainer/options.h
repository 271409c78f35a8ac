// The trainer's settings and scenario names, shared by the flag parser (main.cc) and the
// training code. Plain data; no threading concerns.
#ifndef COLLWATCH_TRAINER_OPTIONS_H_
#define COLLWATCH_TRAINER_OPTIONS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace collwatch::trainer {

// The scenario names (trainer/README.md), in their order.
enum class Scenario {
  kClean,
  kImageText,
  kImageTextDummy,
  kImageTextBatchSync,
  kExpertSkip,
  kDtypeMismatch,
  kFirstForwardStall,
  kMtpSequentialBackward,
  kPipeline,
  kPipelineFewerMicrobatches,
  kPipelineSkipEmptyMicrobatch,
};

struct ScenarioName {
  Scenario scenario;
  std::string_view name;
};

inline constexpr ScenarioName kScenarioNames[] = {
    {Scenario::kClean, "clean"},
    {Scenario::kImageText, "image-text"},
    {Scenario::kImageTextDummy, "image-text-dummy"},
    {Scenario::kImageTextBatchSync, "image-text-batchsync"},
    {Scenario::kExpertSkip, "expert-skip"},
    {Scenario::kDtypeMismatch, "dtype-mismatch"},
    {Scenario::kFirstForwardStall, "first-forward-stall"},
    {Scenario::kMtpSequentialBackward, "mtp-sequential-backward"},
    {Scenario::kPipeline, "pipeline"},
    {Scenario::kPipelineFewerMicrobatches, "pipeline-fewer-microbatches"},
    {Scenario::kPipelineSkipEmptyMicrobatch, "pipeline-skip-empty-microbatch"},
};

// Pipeline parallel (pipeline_trainer.h) rather than ZeRO-3.
inline bool IsPipelineScenario(Scenario scenario) {
  return scenario == Scenario::kPipeline || scenario == Scenario::kPipelineFewerMicrobatches ||
         scenario == Scenario::kPipelineSkipEmptyMicrobatch;
}

inline std::optional<Scenario> ParseScenario(std::string_view name) {
  for (const ScenarioName& entry : kScenarioNames) {
    if (entry.name == name) return entry.scenario;
  }
  return std::nullopt;
}

inline std::string_view ScenarioToString(Scenario scenario) {
  for (const ScenarioName& entry : kScenarioNames) {
    if (entry.scenario == scenario) return entry.name;
  }
  return "?";
}

struct ModelOptions {
  int64_t hidden = 64;
  int64_t heads = 4;          // attention heads per block
  int64_t layers = 2;         // trunk transformer blocks
  int64_t vision_layers = 2;  // frozen vision encoder blocks
  int64_t experts = 2;        // domain experts after the trunk (0: none)
  int64_t n_future = 4;       // multi-token prediction heads (labels shifted by 1..n_future)
  int64_t vocab = 64;
  int64_t seq = 16;
  int64_t image_size = 8;  // square RGB images
  int64_t patch = 4;       // image_size / patch squared = image placeholder tokens
};

struct TrainerOptions {
  ModelOptions model;
  Scenario scenario = Scenario::kClean;
  std::string device = "cpu";  // "cpu" or "cuda"
  int64_t steps = 10;
  int64_t batch = 2;           // samples per rank per step
  double lr = 3e-3;
  double weight_decay = 0.01;
  uint64_t seed = 1234;
  double image_fraction = 0.5;  // chance that a rank's batch has images (image-text scenarios)
  double image_skew = 0.5;      // added on even ranks, taken off on odd ranks
  int64_t mixed_from_step = 0;  // image-text scenarios: every batch has images before this step
  double stall_seconds = 120;   // first-forward-stall: how late the stalled rank is
  int stall_rank = 1;           // the rank that misbehaves in the single-rank scenarios
  std::string dump_params;      // after training: write gathered params and grads here
  int64_t microbatches = 4;     // pipeline scenarios: microbatches a step, of `batch` samples each
  // pipeline-fewer-microbatches / pipeline-skip-empty-microbatch: from this step on the last
  // stage runs one microbatch fewer / the first stage skips its last microbatch as empty
  int64_t fewer_from_step = 2;
};

}  // namespace collwatch::trainer

#endif  // COLLWATCH_TRAINER_OPTIONS_H_
