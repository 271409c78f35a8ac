// SyntheticData (see data.h). Threading: stateless after construction.
#include "trainer/data.h"

#include <algorithm>
#include <vector>

namespace collwatch::trainer {
namespace {

uint64_t Mix(uint64_t value) {  // SplitMix64's finaliser: a good 64-bit hash
  value += 0x9e3779b97f4a7c15ull;
  value = (value ^ (value >> 30)) * 0xbf58476d1ce4e5b9ull;
  value = (value ^ (value >> 27)) * 0x94d049bb133111ebull;
  return value ^ (value >> 31);
}

uint64_t Hash(uint64_t a, uint64_t b, uint64_t c = 0) { return Mix(Mix(Mix(a) ^ b) ^ c); }

double Uniform(uint64_t hash) { return static_cast<double>(hash >> 11) * 0x1.0p-53; }

}  // namespace

SyntheticData::SyntheticData(const TrainerOptions& options, int rank, int world_size)
    : options_(options), rank_(rank), world_size_(world_size) {
  const int64_t side = options.model.image_size / options.model.patch;
  image_tokens_ = side * side;
}

BatchKind SyntheticData::DrawKind(int64_t step, int rank) const {
  if (step < options_.mixed_from_step) return BatchKind::kImageText;
  const double skew = rank % 2 == 0 ? options_.image_skew : -options_.image_skew;
  const double chance = std::clamp(options_.image_fraction + skew, 0.0, 1.0);
  const double draw = Uniform(Hash(options_.seed, 0x6b696e64, static_cast<uint64_t>(step) << 20 |
                                                                  static_cast<uint64_t>(rank)));
  return draw < chance ? BatchKind::kImageText : BatchKind::kTextOnly;
}

Batch SyntheticData::Get(int64_t step, BatchKind kind, bool only_domain_zero) const {
  const ModelOptions& model = options_.model;
  const int64_t batch = options_.batch;
  const int64_t seq = model.seq;
  // A small text alphabet: what follows what is quick to learn at any vocabulary size.
  const int64_t text_values = std::min<int64_t>(model.vocab - kFirstTextToken, kTextAlphabet);
  const int64_t pixels = 3 * model.image_size * model.image_size;
  const bool images = kind == BatchKind::kImageText;
  const int64_t text_start = images ? 1 + image_tokens_ : 2;

  std::vector<int64_t> tokens(batch * seq, kImageToken);
  std::vector<int64_t> domains(batch);
  std::vector<float> pixel_values(images ? batch * pixels : 0);
  for (int64_t sample = 0; sample < batch; ++sample) {
    // The global index makes world 1 with batch B*N see exactly what N ranks of B see.
    const uint64_t global = static_cast<uint64_t>((step * world_size_ + rank_) * batch + sample);
    const uint64_t hash = Hash(options_.seed, global);
    const int64_t image_class = static_cast<int64_t>(hash % kImageClasses);
    const int64_t start = static_cast<int64_t>((hash >> 8) % static_cast<uint64_t>(text_values));
    const int64_t domain = only_domain_zero ? 0 : static_cast<int64_t>(global % 2);
    const int64_t stride = (image_class + 1) * (domain == 0 ? 1 : -1);
    domains[sample] = domain;

    int64_t* row = &tokens[sample * seq];
    row[0] = kBosToken;
    if (!images) row[1] = kStrideToken + image_class;
    for (int64_t position = text_start; position < seq; ++position) {
      const int64_t offset = start + (position - text_start) * stride;
      row[position] = kFirstTextToken + ((offset % text_values) + text_values) % text_values;
    }
    if (images) {
      // A fixed random template per class plus per-sample noise: the class is visible
      // to the vision tower, and only through it.
      float* image = &pixel_values[sample * pixels];
      for (int64_t i = 0; i < pixels; ++i) {
        const double base = Uniform(Hash(options_.seed ^ 0x696d67, image_class, i)) * 2 - 1;
        const double noise = Uniform(Hash(hash, 0x6e6f6973, i)) * 0.2 - 0.1;
        image[i] = static_cast<float>(base + noise);
      }
    }
  }

  std::vector<int64_t> labels(model.n_future * batch * seq, kIgnoreLabel);
  for (int64_t head = 0; head < model.n_future; ++head) {
    for (int64_t sample = 0; sample < batch; ++sample) {
      for (int64_t position = 0; position + head + 1 < seq; ++position) {
        const int64_t target = tokens[sample * seq + position + head + 1];
        if (target != kImageToken) labels[(head * batch + sample) * seq + position] = target;
      }
    }
  }

  Batch out;
  out.kind = kind;
  const auto long_options = at::TensorOptions().dtype(at::kLong);
  out.tokens = at::tensor(tokens, long_options).view({batch, seq});
  out.labels = at::tensor(labels, long_options).view({model.n_future, batch, seq});
  out.domains = at::tensor(domains, long_options);
  if (images) {
    out.pixel_values = at::tensor(pixel_values, at::TensorOptions().dtype(at::kFloat))
                           .view({batch, 3, model.image_size, model.image_size});
  }
  return out;
}

}  // namespace collwatch::trainer
