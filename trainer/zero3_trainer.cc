// ZeRO-3 training loop and the scenarios (see zero3_trainer.h). The backward is an
// explicit per-unit recompute loop: the forward runs without autograd and keeps only each
// unit's input; the backward all-gathers a unit again, reruns it with autograd from the
// saved input and pushes the incoming gradient through it. Threading: one thread.
#include "trainer/zero3_trainer.h"

#include <ATen/Parallel.h>
#include <c10/core/GradMode.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "trainer/comm.h"
#include "trainer/data.h"
#include "trainer/model.h"
#include "trainer/nvtx_range.h"

namespace collwatch::trainer {
namespace {

constexpr double kAdamBeta1 = 0.9;
constexpr double kAdamBeta2 = 0.999;
constexpr double kAdamEps = 1e-8;

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

class Zero3Trainer {
 public:
  Zero3Trainer(const TrainerOptions& options, const DistEnv& env, Communicator& comm,
               const at::Device& device);

  // One training step; returns this rank's loss (mean over the MTP heads).
  double Step(int64_t step);
  // Gathers every unit's parameters and last gradients; rank 0 writes them to `path`.
  bool DumpParams(const std::string& path);

  int64_t ParameterCount(bool trainable_only) const;
  uint64_t first_gather_bytes() const { return first_gather_bytes_; }
  uint64_t forward_gather_bytes() const { return forward_gather_bytes_; }

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
  // Samples go to the expert of their domain; an expert without samples does not run.
  at::Tensor update = at::zeros_like(x);
  for (size_t e = 0; e < experts_.size(); ++e) {
    const at::Tensor routed =
        at::nonzero(domains_.remainder(static_cast<int64_t>(experts_.size())) == static_cast<int64_t>(e))
            .flatten();
    if (routed.numel() == 0) continue;
    const at::Tensor out = ExpertForward(Weights(units_[experts_[e]]), x.index_select(0, routed));
    update = update.index_copy(0, routed, out);
  }
  return update;
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

// Settings the model cannot run with, as a message (empty when fine).
std::string CheckOptions(const TrainerOptions& options, int world_size) {
  const ModelOptions& model = options.model;
  if (model.hidden <= 0 || model.heads <= 0 || model.hidden % model.heads != 0) {
    return "--hidden must be a positive multiple of --heads";
  }
  if (model.patch <= 0 || model.image_size % model.patch != 0) {
    return "--image-size must be a multiple of --patch";
  }
  const int64_t side = model.image_size / model.patch;
  if (model.seq < 2 + side * side + model.n_future) {
    return "--seq must exceed the image tokens (" + std::to_string(side * side) + ") + n_future + 1";
  }
  if (model.vocab < kFirstTextToken + 8) return "--vocab must be at least 16";
  if (model.n_future < 1 || model.layers < 0 || model.vision_layers < 0 || model.experts < 0) {
    return "--n-future must be at least 1 and layer counts non-negative";
  }
  if (options.batch < 1 || options.steps < 0) return "--batch must be at least 1";
  if (options.stall_rank < 0 || options.stall_rank >= world_size) {
    if (options.scenario == Scenario::kDtypeMismatch ||
        options.scenario == Scenario::kFirstForwardStall) {
      return "--stall-rank " + std::to_string(options.stall_rank) + " is not a rank of this job";
    }
  }
  return "";
}

}  // namespace

int RunTraining(const TrainerOptions& options, const DistEnv& env) {
  if (const std::string problem = CheckOptions(options, env.world_size); !problem.empty()) {
    std::fprintf(stderr, "collwatch-trainer: %s\n", problem.c_str());
    return 2;
  }
  at::Device device(at::kCPU);
  if (options.device == "cuda") {
    SelectCudaDevice(env.local_rank);
    device = at::Device(at::kCUDA, static_cast<c10::DeviceIndex>(env.local_rank));
  } else if (options.device != "cpu") {
    std::fprintf(stderr, "collwatch-trainer: --device must be cpu or cuda\n");
    return 2;
  } else {
    at::set_num_threads(1);  // ranks share the machine's cores
  }

  std::unique_ptr<RendezvousStore> store;
  ncclUniqueId id{};
  if (env.world_size == 1) {
    id = Communicator::NewUniqueId();
  } else {
    store = std::make_unique<RendezvousStore>(env);
    std::vector<uint8_t> bytes;
    if (env.rank == 0) {
      const ncclUniqueId fresh = Communicator::NewUniqueId();
      bytes.assign(reinterpret_cast<const uint8_t*>(&fresh), reinterpret_cast<const uint8_t*>(&fresh) + sizeof fresh);
    }
    bytes = store->Share("collwatch/nccl_unique_id", bytes);
    if (bytes.size() != sizeof id) {
      std::fprintf(stderr, "collwatch-trainer: rank %d: bad unique id from the store\n", env.rank);
      return 2;
    }
    std::memcpy(&id, bytes.data(), sizeof id);
  }

  Communicator comm(env.rank, env.world_size, id, device);
  Zero3Trainer trainer(options, env, comm, device);
  if (env.rank == 0) {
    std::printf("collwatch-trainer: scenario %s, %d ranks on %s, %lld parameters (%lld trainable)\n",
                std::string(ScenarioToString(options.scenario)).c_str(), env.world_size,
                device.str().c_str(), static_cast<long long>(trainer.ParameterCount(false)),
                static_cast<long long>(trainer.ParameterCount(true)));
    std::fflush(stdout);
  }
  for (int64_t step = 0; step < options.steps; ++step) {
    const auto start = std::chrono::steady_clock::now();
    const double loss = trainer.Step(step);
    const double millis =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    std::printf("rank %d step %lld loss %.4f time_ms %.1f\n", env.rank, static_cast<long long>(step),
                loss, millis);
    if (step == 0 && env.rank == 0) {
      std::printf("rank 0 first all-gather bytes %llu, first forward all-gather bytes %llu\n",
                  static_cast<unsigned long long>(trainer.first_gather_bytes()),
                  static_cast<unsigned long long>(trainer.forward_gather_bytes()));
    }
    std::fflush(stdout);
  }
  if (!options.dump_params.empty() && !trainer.DumpParams(options.dump_params)) return 1;
  return 0;
}

}  // namespace collwatch::trainer
