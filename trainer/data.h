// The deterministic synthetic dataset: image+text and text-only samples tokenised to fixed
// shapes, learnable (arithmetic token progressions whose stride the image's class, or a
// stride token, gives). Every sample is a pure function of (seed, global index, kind), so
// any world size sees the same global batch. Threading: const methods, any thread.
#ifndef COLLWATCH_TRAINER_DATA_H_
#define COLLWATCH_TRAINER_DATA_H_

#include <ATen/ATen.h>

#include <cstdint>

#include "trainer/options.h"

namespace collwatch::trainer {

enum class BatchKind : int32_t { kImageText = 0, kTextOnly = 1 };

// Token ids below kFirstTextToken are special.
inline constexpr int64_t kBosToken = 1;
inline constexpr int64_t kImageToken = 2;   // placeholder replaced by an image feature
inline constexpr int64_t kStrideToken = 3;  // kStrideToken + c: text-only stride class c
inline constexpr int64_t kFirstTextToken = 8;
inline constexpr int64_t kImageClasses = 4;
inline constexpr int64_t kTextAlphabet = 16;  // progressions run modulo this
inline constexpr int64_t kIgnoreLabel = -100;  // cross-entropy's default ignore index

struct Batch {
  BatchKind kind = BatchKind::kImageText;
  at::Tensor tokens;        // [batch, seq] int64
  at::Tensor pixel_values;  // [batch, 3, image, image] float; undefined for text-only
  at::Tensor labels;        // [n_future, batch, seq] int64: head d predicts token i + d + 1
  at::Tensor domains;       // [batch] int64: 0 ascending, 1 descending progressions
};

class SyntheticData {
 public:
  SyntheticData(const TrainerOptions& options, int rank, int world_size);

  // The batch kind this rank would draw at `step` (seeded; even ranks are skewed towards
  // images, odd ranks towards text by --image-skew).
  BatchKind DrawKind(int64_t step, int rank) const;

  // This rank's batch at `step`. `only_domain_zero` takes the domain-1 samples away.
  Batch Get(int64_t step, BatchKind kind, bool only_domain_zero) const;

  int64_t image_tokens() const { return image_tokens_; }

 private:
  const TrainerOptions& options_;
  int rank_;
  int world_size_;
  int64_t image_tokens_;
};

}  // namespace collwatch::trainer

#endif  // COLLWATCH_TRAINER_DATA_H_
