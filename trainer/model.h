// The VLM/MTP model as ZeRO-3 units: each unit is a named list of parameter shapes stored
// as one flat tensor, and a pure function of (unit weights, inputs). The trainer owns the
// flat storage (sharded, gathered on demand); this file only knows shapes, initial values
// and the maths. Threading: pure functions.
#ifndef COLLWATCH_TRAINER_MODEL_H_
#define COLLWATCH_TRAINER_MODEL_H_

#include <ATen/ATen.h>

#include <cstdint>
#include <string>
#include <vector>

#include "trainer/options.h"

namespace collwatch::trainer {

enum class UnitKind {
  kVisionPatch,  // patch embedding + position embedding (frozen)
  kVisionBlock,  // bidirectional transformer block (frozen)
  kProjector,    // vision features -> token space (2-layer MLP)
  kEmbed,        // token + position embedding
  kTrunkBlock,   // causal transformer block
  kExpert,       // domain expert: pre-norm MLP added to the residual
  kHead,         // one MTP head: a causal transformer block
  kUnembed,      // final norm + vocabulary projection, shared by every head
};

struct ParamSpec {
  enum class Init { kNormal, kZeros, kOnes };
  std::vector<int64_t> shape;
  Init init = Init::kNormal;
};

struct UnitSpec {
  std::string name;  // e.g. "trunk.block3": NVTX ranges are "fwd/" + name, "bwd/" + name
  UnitKind kind;
  int64_t index = 0;  // block / expert / head number
  bool trainable = true;
  std::vector<ParamSpec> params;

  int64_t Numel() const;
};

// Every unit in forward order: vision.patch, vision.block*, projector, embed,
// trunk.block*, trunk.expert*, mtp.head*, unembed.
std::vector<UnitSpec> BuildUnits(const ModelOptions& options);

// The unit's initial flat parameters (CPU float32, unpadded), a function of (seed, unit
// name) only: the same on every rank and for every world size.
at::Tensor InitialFlat(const UnitSpec& unit, uint64_t seed);

// Views of `flat` (at least Numel() elements) shaped as the unit's parameters. Views of a
// tensor that requires grad send their gradients to it.
std::vector<at::Tensor> ParamViews(const UnitSpec& unit, const at::Tensor& flat);

// The units' maths. `w` is ParamViews of the unit.
at::Tensor VisionPatchForward(const std::vector<at::Tensor>& w, const at::Tensor& pixel_values,
                              int64_t patch);
at::Tensor BlockForward(const std::vector<at::Tensor>& w, const at::Tensor& x, int64_t heads,
                        bool causal);
at::Tensor ProjectorForward(const std::vector<at::Tensor>& w, const at::Tensor& features);
at::Tensor EmbedForward(const std::vector<at::Tensor>& w, const at::Tensor& tokens);
at::Tensor ExpertForward(const std::vector<at::Tensor>& w, const at::Tensor& x);  // the update only
// The experts' update of `x`: each sample goes to the expert of its domain (domains
// [batch] modulo the experts); an expert without samples does not run.
at::Tensor RoutedExpertsUpdate(const std::vector<std::vector<at::Tensor>>& experts, const at::Tensor& domains,
                               const at::Tensor& x);
at::Tensor UnembedForward(const std::vector<at::Tensor>& w, const at::Tensor& x);

// Image placeholders (positions 1..image_tokens) replaced by the projected features.
at::Tensor MergeImageFeatures(const at::Tensor& embedded, const at::Tensor& projected);

// Mean cross-entropy of logits [batch, seq, vocab] against labels [batch, seq].
at::Tensor TokenLoss(const at::Tensor& logits, const at::Tensor& labels);

}  // namespace collwatch::trainer

#endif  // COLLWATCH_TRAINER_MODEL_H_
