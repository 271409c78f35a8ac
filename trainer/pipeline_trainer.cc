// Pipeline-parallel training: see pipeline_trainer.h. Threading: one training thread.
#include "trainer/pipeline_trainer.h"

#include <c10/core/GradMode.h>

#include <algorithm>
#include <cstdio>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "trainer/nvtx_range.h"

namespace collwatch::trainer {

int StageOf(const UnitSpec& unit, const ModelOptions& model, int stages) {
  switch (unit.kind) {
    case UnitKind::kVisionPatch:
    case UnitKind::kVisionBlock:
    case UnitKind::kProjector:
    case UnitKind::kEmbed:
      return 0;
    case UnitKind::kTrunkBlock:
      return static_cast<int>(unit.index * stages / std::max<int64_t>(1, model.layers));
    case UnitKind::kExpert:
    case UnitKind::kHead:
    case UnitKind::kUnembed:
      break;
  }
  return stages - 1;
}

PipelineTrainer::PipelineTrainer(const TrainerOptions& options, const DistEnv& env, Communicator& comm,
                                 const at::Device& device)
    : options_(options), stage_(env.rank), stages_(env.world_size), comm_(comm), device_(device),
      data_(options, /*rank=*/0, /*world_size=*/1) {
  for (UnitSpec& spec : BuildUnits(options.model)) {
    model_parameters_ += spec.Numel();
    if (spec.trainable) model_trainable_ += spec.Numel();
    if (StageOf(spec, options.model, stages_) != stage_) continue;
    at::Tensor flat = InitialFlat(spec, options.seed).to(device);
    if (spec.trainable) flat.requires_grad_(true);
    units_.push_back(StageUnit{std::move(spec), std::move(flat)});
  }
}

int64_t PipelineTrainer::ParameterCount(bool trainable_only) const {
  return trainable_only ? model_trainable_ : model_parameters_;
}

bool PipelineTrainer::DumpParams(const std::string& /*path*/) {
  std::fprintf(stderr, "collwatch-trainer: --dump-params is for the ZeRO-3 scenarios\n");
  return false;
}

int64_t PipelineTrainer::MicrobatchesAt(int64_t step) const {
  if (step < options_.fewer_from_step) return options_.microbatches;
  // The scenarios' faults: a data loader that gives the last stage a shorter batch; a first
  // stage that finds its last microbatch empty (every sample filtered out) and skips it,
  // sending nothing for it, while the stages after it still expect it.
  const bool fewer = (options_.scenario == Scenario::kPipelineFewerMicrobatches && stage_ == stages_ - 1) ||
                     (options_.scenario == Scenario::kPipelineSkipEmptyMicrobatch && stage_ == 0);
  return options_.microbatches - (fewer ? 1 : 0);
}

Batch PipelineTrainer::Microbatch(int64_t step, int64_t microbatch) const {
  Batch batch = data_.Get(step * options_.microbatches + microbatch, BatchKind::kImageText,
                          /*only_domain_zero=*/false);
  batch.tokens = batch.tokens.to(device_);
  batch.labels = batch.labels.to(device_);
  batch.domains = batch.domains.to(device_);
  batch.pixel_values = batch.pixel_values.to(device_);
  return batch;
}

at::Tensor PipelineTrainer::ActivationsLike() const {
  return at::empty({options_.batch, options_.model.seq, options_.model.hidden},
                   at::TensorOptions().dtype(at::kFloat).device(device_));
}

PipelineTrainer::Saved PipelineTrainer::Forward(int64_t step, int64_t microbatch) {
  const ModelOptions& model = options_.model;
  const bool first = stage_ == 0;
  const bool last = stage_ == stages_ - 1;
  NvtxRange range("fwd/microbatch" + std::to_string(microbatch));
  Saved saved;
  Batch batch;
  if (first || last) batch = Microbatch(step, microbatch);
  at::Tensor x;
  if (first) {
    at::Tensor features;
    at::Tensor projected;
    for (size_t i = 0; i < units_.size(); ++i) {
      const int index = static_cast<int>(i);
      switch (units_[i].spec.kind) {
        case UnitKind::kVisionPatch: {
          c10::NoGradGuard frozen;
          features = VisionPatchForward(Weights(index), batch.pixel_values, model.patch);
          break;
        }
        case UnitKind::kVisionBlock: {
          c10::NoGradGuard frozen;
          features = BlockForward(Weights(index), features, model.heads, /*causal=*/false);
          break;
        }
        case UnitKind::kProjector: projected = ProjectorForward(Weights(index), features); break;
        case UnitKind::kEmbed: x = MergeImageFeatures(EmbedForward(Weights(index), batch.tokens), projected); break;
        default: break;
      }
    }
  } else {
    saved.input = ActivationsLike();
    comm_.Recv(saved.input, stage_ - 1);
    saved.input.requires_grad_(true);
    x = saved.input;
  }
  std::vector<std::vector<at::Tensor>> experts;
  std::vector<int> heads;
  int unembed = -1;
  for (size_t i = 0; i < units_.size(); ++i) {
    const int index = static_cast<int>(i);
    switch (units_[i].spec.kind) {
      case UnitKind::kTrunkBlock: x = BlockForward(Weights(index), x, model.heads, /*causal=*/true); break;
      case UnitKind::kExpert: experts.push_back(Weights(index)); break;
      case UnitKind::kHead: heads.push_back(index); break;
      case UnitKind::kUnembed: unembed = index; break;
      default: break;
    }
  }
  if (!last) {
    comm_.Send(x.detach().contiguous(), stage_ + 1);
    saved.output = x;
    return saved;
  }
  if (!experts.empty()) x = x + RoutedExpertsUpdate(experts, batch.domains, x);
  // Multi-token prediction: the mean of the heads' losses, averaged over the microbatches.
  at::Tensor loss = at::zeros({}, x.options());
  for (size_t k = 0; k < heads.size(); ++k) {
    const at::Tensor logits =
        UnembedForward(Weights(unembed), BlockForward(Weights(heads[k]), x, model.heads, /*causal=*/true));
    loss = loss + TokenLoss(logits, batch.labels[static_cast<int64_t>(k)]);
  }
  saved.output = loss / static_cast<double>(heads.size() * static_cast<size_t>(options_.microbatches));
  return saved;
}

void PipelineTrainer::Backward(const Saved& saved) {
  if (stage_ == stages_ - 1) {
    saved.output.backward();
  } else {
    const at::Tensor grad = ActivationsLike();
    comm_.Recv(grad, stage_ + 1);
    saved.output.backward(grad);
  }
  if (stage_ > 0) comm_.Send(saved.input.grad().contiguous(), stage_ - 1);
}

double PipelineTrainer::Step(int64_t step) {
  NvtxRange step_range("step " + std::to_string(step));
  const int64_t microbatches = MicrobatchesAt(step);
  std::vector<Saved> saved;
  for (int64_t microbatch = 0; microbatch < microbatches; ++microbatch) saved.push_back(Forward(step, microbatch));
  double loss = 0;
  for (int64_t microbatch = 0; microbatch < microbatches; ++microbatch) {
    NvtxRange range("bwd/microbatch" + std::to_string(microbatch));
    Backward(saved[static_cast<size_t>(microbatch)]);
    if (stage_ == stages_ - 1) loss += saved[static_cast<size_t>(microbatch)].output.item<double>();
  }
  NvtxRange range("optim");
  c10::NoGradGuard no_grad;
  for (StageUnit& unit : units_) {
    if (!unit.flat.requires_grad() || !unit.flat.grad().defined()) continue;
    unit.flat.sub_(unit.flat.grad(), options_.lr);
    unit.flat.mutable_grad().zero_();
  }
  return stage_ == stages_ - 1 ? loss : std::numeric_limits<double>::quiet_NaN();
}

}  // namespace collwatch::trainer
