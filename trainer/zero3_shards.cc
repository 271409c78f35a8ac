// The trainer's sharded parameters: every unit built identically on every rank (seeded by
// name) and cut to this rank's flat shard; gathered whole before a unit runs, freed after;
// gradients reduce-scattered (averaged) into the shard; AdamW of our own on the shard; and
// the dump of every unit's parameters and gradients. Threading: one training thread.
#include <c10/core/GradMode.h>

#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "trainer/nvtx_range.h"
#include "trainer/zero3_trainer_internal.h"

namespace collwatch::trainer {
namespace {

constexpr double kAdamBeta1 = 0.9;
constexpr double kAdamBeta2 = 0.999;
constexpr double kAdamEps = 1e-8;

}  // namespace

Zero3Trainer::Zero3Trainer(const TrainerOptions& options, const DistEnv& env, Communicator& comm,
                           const at::Device& device)
    : options_(options), rank_(env.rank), comm_(comm), device_(device),
      data_(options, env.rank, env.world_size) {
  if (options.scenario == Scenario::kDtypeMismatch && rank_ == options.stall_rank) {
    reduce_dtype_ = at::kBFloat16;  // this rank's mixed-precision policy differs
  }
  const auto float_options = at::TensorOptions().dtype(at::kFloat).device(device);
  for (UnitSpec& spec : BuildUnits(options.model)) {
    ShardedUnit unit;
    unit.numel = spec.Numel();
    unit.shard_numel = (unit.numel + env.world_size - 1) / env.world_size;
    // Every rank builds the same full unit (seeded by name) and keeps its slice; one
    // unit at a time, so the host never holds the whole model.
    const at::Tensor padded = at::zeros({unit.shard_numel * env.world_size}, at::kFloat);
    padded.narrow(0, 0, unit.numel).copy_(InitialFlat(spec, options.seed));
    unit.shard = padded.narrow(0, rank_ * unit.shard_numel, unit.shard_numel).to(device).clone();
    if (spec.trainable) {
      unit.grad_shard = at::zeros({unit.shard_numel}, float_options);
      unit.adam_m = at::zeros({unit.shard_numel}, float_options);
      unit.adam_v = at::zeros({unit.shard_numel}, float_options);
    }
    const int index = static_cast<int>(units_.size());
    switch (spec.kind) {
      case UnitKind::kVisionPatch: vision_patch_ = index; break;
      case UnitKind::kVisionBlock: vision_blocks_.push_back(index); break;
      case UnitKind::kProjector: projector_ = index; break;
      case UnitKind::kEmbed: embed_ = index; break;
      case UnitKind::kTrunkBlock: trunk_blocks_.push_back(index); break;
      case UnitKind::kExpert: experts_.push_back(index); break;
      case UnitKind::kHead: heads_.push_back(index); break;
      case UnitKind::kUnembed: unembed_ = index; break;
    }
    unit.spec = std::move(spec);
    units_.push_back(std::move(unit));
  }
}

std::string Zero3Trainer::FirstStepNote() const {
  return "first all-gather bytes " + std::to_string(first_gather_bytes_) + ", first forward all-gather bytes " +
         std::to_string(forward_gather_bytes_);
}

int64_t Zero3Trainer::ParameterCount(bool trainable_only) const {
  int64_t total = 0;
  for (const ShardedUnit& unit : units_) {
    if (unit.spec.trainable || !trainable_only) total += unit.numel;
  }
  return total;
}

void Zero3Trainer::Gather(ShardedUnit& unit, GatherFor purpose) {
  at::Tensor full = at::empty({unit.shard_numel * comm_.world_size()}, unit.shard.options());
  comm_.AllGather(unit.shard, full);
  const uint64_t bytes = static_cast<uint64_t>(full.numel()) * full.element_size();
  if (first_gather_bytes_ == 0) first_gather_bytes_ = bytes;
  if (purpose != GatherFor::kRecompute) forward_gather_bytes_ += bytes;
  // A leaf that requires grad: the parameter views send their gradients into full.grad().
  if (purpose != GatherFor::kForward && unit.spec.trainable) full.requires_grad_(true);
  unit.full = full;
}

void Zero3Trainer::ReduceScatterGrad(ShardedUnit& unit) {
  at::Tensor grad = unit.full.grad();
  if (!grad.defined()) {
    // No gradient reached the unit (an expert no sample was routed to). A reducer driven
    // by gradient hooks never hears of it and skips the unit; the right thing is to
    // reduce zeros, because the other ranks do reduce it.
    if (options_.scenario == Scenario::kExpertSkip) return;
    grad = at::zeros_like(unit.full);
  }
  const at::Tensor to_send = grad.detach().to(reduce_dtype_).contiguous();
  const at::Tensor received = at::empty({unit.shard_numel}, to_send.options());
  comm_.ReduceScatterAverage(to_send, received);
  unit.grad_shard.add_(received.to(at::kFloat));
}

void Zero3Trainer::OptimizerStep(int64_t step) {
  // AdamW (decoupled weight decay) on the local shards only.
  const double t = static_cast<double>(step + 1);
  const double bias1 = 1 - std::pow(kAdamBeta1, t);
  const double bias2 = 1 - std::pow(kAdamBeta2, t);
  c10::NoGradGuard no_grad;
  for (ShardedUnit& unit : units_) {
    if (!unit.spec.trainable) continue;
    const at::Tensor& grad = unit.grad_shard;
    unit.adam_m.mul_(kAdamBeta1).add_(grad, 1 - kAdamBeta1);
    unit.adam_v.mul_(kAdamBeta2).addcmul_(grad, grad, 1 - kAdamBeta2);
    unit.shard.mul_(1 - options_.lr * options_.weight_decay);
    const at::Tensor denominator = (unit.adam_v / bias2).sqrt_().add_(kAdamEps);
    unit.shard.addcdiv_(unit.adam_m, denominator, -options_.lr / bias1);
  }
}

bool Zero3Trainer::DumpParams(const std::string& path) {
  NvtxRange range("dump");
  FILE* file = nullptr;
  if (rank_ == 0 && (file = std::fopen(path.c_str(), "wb")) == nullptr) {
    std::fprintf(stderr, "collwatch-trainer: cannot write %s\n", path.c_str());
  }
  bool ok = true;
  // Every rank takes part in every gather, whether rank 0 could open the file or not.
  for (ShardedUnit& unit : units_) {
    Gather(unit, GatherFor::kForward);
    const at::Tensor params = unit.full.narrow(0, 0, unit.numel).to(at::kCPU).contiguous();
    Free(unit);
    at::Tensor grads;
    if (unit.spec.trainable) {
      const at::Tensor full = at::empty({unit.shard_numel * comm_.world_size()}, unit.grad_shard.options());
      comm_.AllGather(unit.grad_shard, full);
      grads = full.narrow(0, 0, unit.numel).to(at::kCPU).contiguous();
    }
    if (file == nullptr) continue;
    std::fprintf(file, "unit %s %lld %d\n", unit.spec.name.c_str(), static_cast<long long>(unit.numel),
                 unit.spec.trainable ? 1 : 0);
    ok &= std::fwrite(params.data_ptr<float>(), sizeof(float), unit.numel, file) ==
          static_cast<size_t>(unit.numel);
    if (grads.defined()) {
      ok &= std::fwrite(grads.data_ptr<float>(), sizeof(float), unit.numel, file) ==
            static_cast<size_t>(unit.numel);
    }
  }
  if (rank_ != 0) return true;
  if (file == nullptr || std::fclose(file) != 0 || !ok) {
    std::fprintf(stderr, "collwatch-trainer: writing %s failed\n", path.c_str());
    return false;
  }
  return true;
}

}  // namespace collwatch::trainer
