// One ZeRO-3 training step and the scenarios (trainer/README.md) that change it. The backward is
// an explicit per-unit recompute loop: the forward runs without autograd and keeps only
// each unit's input; the backward all-gathers a unit again, reruns it with autograd from
// the saved input and pushes the incoming gradient through it. Threading: one thread.
#include <c10/core/GradMode.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "trainer/nvtx_range.h"
#include "trainer/zero3_trainer_internal.h"

namespace collwatch::trainer {

BatchKind Zero3Trainer::ChooseKind(int64_t step) {
  switch (options_.scenario) {
    case Scenario::kImageText:
    case Scenario::kImageTextDummy:
      return data_.DrawKind(step, rank_);  // each rank on its own: kinds differ across ranks
    case Scenario::kImageTextBatchSync: {
      // Rank 0 decides for everyone; the broadcast is on every rank's schedule alike.
      NvtxRange range("data/batch_kind");
      const at::Tensor kind = at::full({1}, static_cast<int32_t>(data_.DrawKind(step, 0)),
                                       at::TensorOptions().dtype(at::kInt).device(device_));
      comm_.Broadcast(kind, 0);
      return static_cast<BatchKind>(kind.item<int32_t>());
    }
    default:
      return BatchKind::kImageText;
  }
}

at::Tensor Zero3Trainer::Combine(const at::Tensor& embedded, const at::Tensor& projected) const {
  switch (mode_) {
    case ImageMode::kMerge: return MergeImageFeatures(embedded, projected);
    case ImageMode::kZeroContribution: return embedded + projected.sum() * 0.0;
    case ImageMode::kNone: break;
  }
  return embedded;
}

at::Tensor Zero3Trainer::ExpertsUpdate(const at::Tensor& x) {
  std::vector<std::vector<at::Tensor>> experts;
  for (int index : experts_) experts.push_back(Weights(units_[index]));
  return RoutedExpertsUpdate(experts, domains_, x);
}

at::Tensor Zero3Trainer::ForwardBody(const Batch& batch) {
  c10::NoGradGuard no_grad;
  const ModelOptions& model = options_.model;
  tokens_ = batch.tokens;
  domains_ = batch.domains;
  block_inputs_.clear();

  at::Tensor projected;
  vision_features_ = at::Tensor();
  if (mode_ != ImageMode::kNone) {
    const at::Tensor pixels =
        mode_ == ImageMode::kMerge
            ? batch.pixel_values
            : at::zeros({batch.tokens.size(0), 3, model.image_size, model.image_size},
                        at::TensorOptions().dtype(at::kFloat).device(device_));
    ShardedUnit& patch = units_[vision_patch_];
    at::Tensor features;
    {
      NvtxRange range("fwd/" + patch.spec.name);
      Gather(patch, GatherFor::kForward);
      features = VisionPatchForward(Weights(patch), pixels, model.patch);
      Free(patch);
    }
    for (int index : vision_blocks_) {
      ShardedUnit& block = units_[index];
      NvtxRange range("fwd/" + block.spec.name);
      Gather(block, GatherFor::kForward);
      features = BlockForward(Weights(block), features, model.heads, /*causal=*/false);
      Free(block);
    }
    vision_features_ = features;
    ShardedUnit& projector = units_[projector_];
    NvtxRange range("fwd/" + projector.spec.name);
    Gather(projector, GatherFor::kForward);
    projected = ProjectorForward(Weights(projector), features);
    Free(projector);
  }
  at::Tensor x;
  {
    ShardedUnit& embed = units_[embed_];
    NvtxRange range("fwd/" + embed.spec.name);
    Gather(embed, GatherFor::kForward);
    x = Combine(EmbedForward(Weights(embed), tokens_), projected);
    Free(embed);
  }
  for (int index : trunk_blocks_) {
    block_inputs_.push_back(x);
    ShardedUnit& block = units_[index];
    NvtxRange range("fwd/" + block.spec.name);
    Gather(block, GatherFor::kForward);
    x = BlockForward(Weights(block), x, model.heads, /*causal=*/true);
    Free(block);
  }
  if (!experts_.empty()) {
    experts_input_ = x;
    for (int index : experts_) {
      NvtxRange range("fwd/" + units_[index].spec.name);
      Gather(units_[index], GatherFor::kForward);
    }
    x = x + ExpertsUpdate(x);
    for (int index : experts_) Free(units_[index]);
  }
  return x;
}

void Zero3Trainer::BackwardBody(at::Tensor grad) {
  const ModelOptions& model = options_.model;
  if (!experts_.empty()) {
    for (int index : experts_) {
      NvtxRange range("bwd/" + units_[index].spec.name);
      Gather(units_[index], GatherFor::kRecompute);
    }
    const at::Tensor input = experts_input_.detach().requires_grad_(true);
    (input + ExpertsUpdate(input)).backward(grad);
    grad = input.grad();
    for (int index : experts_) {
      NvtxRange range("bwd/" + units_[index].spec.name);
      ReduceScatterGrad(units_[index]);
      Free(units_[index]);
    }
  }
  for (size_t i = trunk_blocks_.size(); i-- > 0;) {
    ShardedUnit& block = units_[trunk_blocks_[i]];
    NvtxRange range("bwd/" + block.spec.name);
    Gather(block, GatherFor::kRecompute);
    const at::Tensor input = block_inputs_[i].detach().requires_grad_(true);
    BlockForward(Weights(block), input, model.heads, /*causal=*/true).backward(grad);
    grad = input.grad();
    ReduceScatterGrad(block);
    Free(block);
  }
  // The embedding and the projector meet in the merged sequence: recompute both.
  ShardedUnit& projector = units_[projector_];
  ShardedUnit& embed = units_[embed_];
  at::Tensor projected;
  if (mode_ != ImageMode::kNone) {
    NvtxRange range("bwd/" + projector.spec.name);
    Gather(projector, GatherFor::kRecompute);
    projected = ProjectorForward(Weights(projector), vision_features_);
  }
  {
    NvtxRange range("bwd/" + embed.spec.name);
    Gather(embed, GatherFor::kRecompute);
  }
  Combine(EmbedForward(Weights(embed), tokens_), projected).backward(grad);
  if (mode_ != ImageMode::kNone) {
    NvtxRange range("bwd/" + projector.spec.name);
    ReduceScatterGrad(projector);
    Free(projector);
  }
  NvtxRange range("bwd/" + embed.spec.name);
  ReduceScatterGrad(embed);
  Free(embed);
}

double Zero3Trainer::Step(int64_t step) {
  NvtxRange step_range("step " + std::to_string(step));
  for (ShardedUnit& unit : units_) {
    if (unit.grad_shard.defined()) unit.grad_shard.zero_();
  }
  forward_gather_bytes_ = 0;
  const Scenario scenario = options_.scenario;
  const BatchKind kind = ChooseKind(step);
  const bool skewed_experts = scenario == Scenario::kExpertSkip && rank_ % 2 == 1;
  Batch batch = data_.Get(step, kind, /*only_domain_zero=*/skewed_experts);
  batch.tokens = batch.tokens.to(device_);
  batch.labels = batch.labels.to(device_);
  batch.domains = batch.domains.to(device_);
  if (batch.pixel_values.defined()) batch.pixel_values = batch.pixel_values.to(device_);

  if (kind == BatchKind::kImageText) {
    mode_ = ImageMode::kMerge;
  } else {
    mode_ = scenario == Scenario::kImageTextDummy ? ImageMode::kZeroContribution : ImageMode::kNone;
  }
  if (scenario == Scenario::kFirstForwardStall && step == 0 && rank_ == options_.stall_rank) {
    NvtxRange range("data/load");  // a slow first batch: data loading, compilation, I/O
    std::this_thread::sleep_for(std::chrono::duration<double>(options_.stall_seconds));
  }

  const at::Tensor trunk_output = ForwardBody(batch);

  // Multi-token prediction, one head at a time: its logits, loss and backward into the
  // (detached) trunk output, then the logits are freed before the next head.
  const bool backward_per_head = scenario == Scenario::kMtpSequentialBackward;
  const at::Tensor shared_input = trunk_output.detach().requires_grad_(true);
  ShardedUnit& unembed = units_[unembed_];
  {
    NvtxRange range("fwd/" + unembed.spec.name);
    Gather(unembed, GatherFor::kForwardWithGrad);
  }
  double loss = 0;
  for (size_t k = 0; k < heads_.size(); ++k) {
    ShardedUnit& head = units_[heads_[k]];
    const at::Tensor input =
        backward_per_head ? trunk_output.detach().requires_grad_(true) : shared_input;
    {
      NvtxRange range("fwd/" + head.spec.name);
      Gather(head, GatherFor::kForwardWithGrad);
      const at::Tensor logits = UnembedForward(
          Weights(unembed), BlockForward(Weights(head), input, options_.model.heads, /*causal=*/true));
      const at::Tensor head_loss =
          TokenLoss(logits, batch.labels[static_cast<int64_t>(k)]) / static_cast<double>(heads_.size());
      head_loss.backward();
      loss += head_loss.item<double>();
    }
    {
      NvtxRange range("bwd/" + head.spec.name);
      ReduceScatterGrad(head);
      Free(head);
    }
    // The scenario's variant: each head's loss goes back through the whole model at once
    // (retain_graph style), so the trunk is gathered and reduced once per head.
    if (backward_per_head) BackwardBody(input.grad());
  }
  {
    NvtxRange range("bwd/" + unembed.spec.name);
    ReduceScatterGrad(unembed);
    Free(unembed);
  }
  if (!backward_per_head) BackwardBody(shared_input.grad());

  NvtxRange range("optim");
  OptimizerStep(step);
  return loss;
}

}  // namespace collwatch::trainer
