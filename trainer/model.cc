// Unit shapes, initial values and maths (see model.h). Threading: pure functions.
#include "trainer/model.h"

#include <ATen/CPUGeneratorImpl.h>

#include <cmath>
#include <functional>
#include <limits>

namespace collwatch::trainer {
namespace {

using Init = ParamSpec::Init;
constexpr double kInitStd = 0.02;
constexpr double kNormEps = 1e-5;

// Pre-norm transformer block: ln1, qkv, attention output, ln2, MLP in, MLP out.
std::vector<ParamSpec> BlockParams(int64_t hidden) {
  return {{{hidden}, Init::kOnes},          {{hidden}, Init::kZeros},
          {{3 * hidden, hidden}, Init::kNormal}, {{3 * hidden}, Init::kZeros},
          {{hidden, hidden}, Init::kNormal},     {{hidden}, Init::kZeros},
          {{hidden}, Init::kOnes},          {{hidden}, Init::kZeros},
          {{4 * hidden, hidden}, Init::kNormal}, {{4 * hidden}, Init::kZeros},
          {{hidden, 4 * hidden}, Init::kNormal}, {{hidden}, Init::kZeros}};
}

at::Tensor LayerNorm(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias) {
  return at::layer_norm(x, {x.size(-1)}, weight, bias, kNormEps);
}

}  // namespace

int64_t UnitSpec::Numel() const {
  int64_t total = 0;
  for (const ParamSpec& param : params) {
    int64_t count = 1;
    for (int64_t extent : param.shape) count *= extent;
    total += count;
  }
  return total;
}

std::vector<UnitSpec> BuildUnits(const ModelOptions& options) {
  const int64_t hidden = options.hidden;
  const int64_t side = options.image_size / options.patch;
  std::vector<UnitSpec> units;
  units.push_back({"vision.patch", UnitKind::kVisionPatch, 0, false,
                   {{{hidden, 3 * options.patch * options.patch}, Init::kNormal},
                    {{hidden}, Init::kZeros},
                    {{side * side, hidden}, Init::kNormal}}});
  for (int64_t i = 0; i < options.vision_layers; ++i) {
    units.push_back({"vision.block" + std::to_string(i), UnitKind::kVisionBlock, i, false,
                     BlockParams(hidden)});
  }
  units.push_back({"projector", UnitKind::kProjector, 0, true,
                   {{{hidden, hidden}, Init::kNormal}, {{hidden}, Init::kZeros},
                    {{hidden, hidden}, Init::kNormal}, {{hidden}, Init::kZeros}}});
  units.push_back({"embed", UnitKind::kEmbed, 0, true,
                   {{{options.vocab, hidden}, Init::kNormal}, {{options.seq, hidden}, Init::kNormal}}});
  for (int64_t i = 0; i < options.layers; ++i) {
    units.push_back({"trunk.block" + std::to_string(i), UnitKind::kTrunkBlock, i, true,
                     BlockParams(hidden)});
  }
  for (int64_t i = 0; i < options.experts; ++i) {
    units.push_back({"trunk.expert" + std::to_string(i), UnitKind::kExpert, i, true,
                     {{{hidden}, Init::kOnes}, {{hidden}, Init::kZeros},
                      {{2 * hidden, hidden}, Init::kNormal}, {{2 * hidden}, Init::kZeros},
                      {{hidden, 2 * hidden}, Init::kNormal}, {{hidden}, Init::kZeros}}});
  }
  for (int64_t i = 0; i < options.n_future; ++i) {
    units.push_back({"mtp.head" + std::to_string(i), UnitKind::kHead, i, true, BlockParams(hidden)});
  }
  units.push_back({"unembed", UnitKind::kUnembed, 0, true,
                   {{{hidden}, Init::kOnes}, {{hidden}, Init::kZeros},
                    {{options.vocab, hidden}, Init::kNormal}}});
  return units;
}

at::Tensor InitialFlat(const UnitSpec& unit, uint64_t seed) {
  // A generator of our own, seeded from the unit's name: no global RNG state involved.
  at::Generator generator = at::detail::createCPUGenerator(
      seed ^ std::hash<std::string>{}(unit.name));
  at::Tensor flat = at::empty({unit.Numel()}, at::TensorOptions().dtype(at::kFloat));
  std::vector<at::Tensor> views = ParamViews(unit, flat);
  for (size_t i = 0; i < views.size(); ++i) {
    switch (unit.params[i].init) {
      case Init::kNormal: views[i].normal_(0.0, kInitStd, generator); break;
      case Init::kZeros: views[i].zero_(); break;
      case Init::kOnes: views[i].fill_(1.0); break;
    }
  }
  return flat;
}

std::vector<at::Tensor> ParamViews(const UnitSpec& unit, const at::Tensor& flat) {
  std::vector<at::Tensor> views;
  int64_t offset = 0;
  for (const ParamSpec& param : unit.params) {
    int64_t count = 1;
    for (int64_t extent : param.shape) count *= extent;
    views.push_back(flat.narrow(0, offset, count).view(param.shape));
    offset += count;
  }
  return views;
}

at::Tensor VisionPatchForward(const std::vector<at::Tensor>& w, const at::Tensor& pixel_values,
                              int64_t patch) {
  const int64_t batch = pixel_values.size(0);
  const int64_t side = pixel_values.size(2) / patch;
  // [B, 3, side*patch, side*patch] -> [B, side*side, 3*patch*patch]
  const at::Tensor patches = pixel_values.view({batch, 3, side, patch, side, patch})
                                 .permute({0, 2, 4, 1, 3, 5})
                                 .reshape({batch, side * side, 3 * patch * patch});
  return at::linear(patches, w[0], w[1]) + w[2];
}

at::Tensor BlockForward(const std::vector<at::Tensor>& w, const at::Tensor& x, int64_t heads,
                        bool causal) {
  const int64_t batch = x.size(0);
  const int64_t seq = x.size(1);
  const int64_t hidden = x.size(2);
  const int64_t head_dim = hidden / heads;
  const at::Tensor qkv = at::linear(LayerNorm(x, w[0], w[1]), w[2], w[3])
                             .view({batch, seq, 3, heads, head_dim})
                             .permute({2, 0, 3, 1, 4});  // [3, B, heads, S, head_dim]
  at::Tensor scores = at::matmul(qkv[0], qkv[1].transpose(-2, -1)) / std::sqrt(double(head_dim));
  if (causal) {
    const at::Tensor future = at::ones({seq, seq}, x.options().dtype(at::kBool)).triu(1);
    scores = scores.masked_fill(future, -std::numeric_limits<float>::infinity());
  }
  const at::Tensor attended =
      at::matmul(at::softmax(scores, -1), qkv[2]).transpose(1, 2).reshape({batch, seq, hidden});
  const at::Tensor after_attention = x + at::linear(attended, w[4], w[5]);
  const at::Tensor mlp =
      at::linear(at::gelu(at::linear(LayerNorm(after_attention, w[6], w[7]), w[8], w[9])), w[10], w[11]);
  return after_attention + mlp;
}

at::Tensor ProjectorForward(const std::vector<at::Tensor>& w, const at::Tensor& features) {
  return at::linear(at::gelu(at::linear(features, w[0], w[1])), w[2], w[3]);
}

at::Tensor EmbedForward(const std::vector<at::Tensor>& w, const at::Tensor& tokens) {
  return at::embedding(w[0], tokens) + w[1].narrow(0, 0, tokens.size(1));
}

at::Tensor ExpertForward(const std::vector<at::Tensor>& w, const at::Tensor& x) {
  return at::linear(at::gelu(at::linear(LayerNorm(x, w[0], w[1]), w[2], w[3])), w[4], w[5]);
}

at::Tensor RoutedExpertsUpdate(const std::vector<std::vector<at::Tensor>>& experts, const at::Tensor& domains,
                               const at::Tensor& x) {
  at::Tensor update = at::zeros_like(x);
  const auto count = static_cast<int64_t>(experts.size());
  for (int64_t e = 0; e < count; ++e) {
    const at::Tensor routed = at::nonzero(domains.remainder(count) == e).flatten();
    if (routed.numel() == 0) continue;
    const at::Tensor out = ExpertForward(experts[static_cast<size_t>(e)], x.index_select(0, routed));
    update = update.index_copy(0, routed, out);
  }
  return update;
}

at::Tensor UnembedForward(const std::vector<at::Tensor>& w, const at::Tensor& x) {
  return at::linear(LayerNorm(x, w[0], w[1]), w[2]);
}

at::Tensor MergeImageFeatures(const at::Tensor& embedded, const at::Tensor& projected) {
  const int64_t image_tokens = projected.size(1);
  const int64_t rest = embedded.size(1) - 1 - image_tokens;
  return at::cat({embedded.narrow(1, 0, 1), projected, embedded.narrow(1, 1 + image_tokens, rest)}, 1);
}

at::Tensor TokenLoss(const at::Tensor& logits, const at::Tensor& labels) {
  return at::cross_entropy_loss(logits.reshape({-1, logits.size(-1)}), labels.reshape({-1}));
}

}  // namespace collwatch::trainer
