// SyntheticData: deterministic, independent of the world size, with the per-rank batch
// kinds the scenarios rely on. Threading: single-threaded.
#include "trainer/data.h"

#include "gtest/gtest.h"

namespace collwatch::trainer {
namespace {

TEST(SyntheticDataTest, AnyWorldSizeSeesTheSameGlobalBatch) {
  TrainerOptions whole;
  whole.batch = 4;
  TrainerOptions half;
  half.batch = 2;
  const SyntheticData single(whole, 0, 1);
  const SyntheticData rank0(half, 0, 2);
  const SyntheticData rank1(half, 1, 2);
  for (int64_t step : {0, 3}) {
    const Batch all = single.Get(step, BatchKind::kImageText, false);
    const Batch first = rank0.Get(step, BatchKind::kImageText, false);
    const Batch second = rank1.Get(step, BatchKind::kImageText, false);
    EXPECT_TRUE(at::equal(all.tokens, at::cat({first.tokens, second.tokens}, 0)));
    EXPECT_TRUE(at::equal(all.pixel_values, at::cat({first.pixel_values, second.pixel_values}, 0)));
    EXPECT_TRUE(at::equal(all.labels, at::cat({first.labels, second.labels}, 1)));
  }
}

TEST(SyntheticDataTest, ShapesPlaceholdersAndShiftedLabels) {
  TrainerOptions options;
  const SyntheticData data(options, 0, 1);
  const int64_t image_tokens = data.image_tokens();
  const Batch images = data.Get(0, BatchKind::kImageText, false);
  ASSERT_EQ(images.tokens.sizes(), (at::IntArrayRef{options.batch, options.model.seq}));
  ASSERT_EQ(images.labels.size(0), options.model.n_future);
  for (int64_t position = 1; position <= image_tokens; ++position) {
    EXPECT_EQ(images.tokens[0][position].item<int64_t>(), kImageToken);
  }
  // Head k's label at position i is token i + k + 1; placeholders are never labels.
  for (int64_t head = 0; head < options.model.n_future; ++head) {
    const int64_t position = image_tokens + 1;
    EXPECT_EQ(images.labels[head][0][position].item<int64_t>(),
              images.tokens[0][position + head + 1].item<int64_t>());
    EXPECT_EQ(images.labels[head][0][0].item<int64_t>(), head + 1 <= image_tokens ? kIgnoreLabel
                                                                                 : images.tokens[0][head + 1].item<int64_t>());
  }
  const Batch text = data.Get(0, BatchKind::kTextOnly, false);
  EXPECT_FALSE(text.pixel_values.defined());
  EXPECT_EQ((text.tokens == kImageToken).sum().item<int64_t>(), 0);
  EXPECT_TRUE(at::equal(data.Get(0, BatchKind::kImageText, false).tokens, images.tokens));
}

TEST(SyntheticDataTest, DefaultSkewGivesEvenRanksImagesAndOddRanksText) {
  TrainerOptions options;
  const SyntheticData data(options, 0, 4);
  for (int64_t step = 0; step < 20; ++step) {
    EXPECT_EQ(data.DrawKind(step, 0), BatchKind::kImageText);
    EXPECT_EQ(data.DrawKind(step, 1), BatchKind::kTextOnly);
  }
  EXPECT_EQ(data.Get(0, BatchKind::kImageText, true).domains.sum().item<int64_t>(), 0);
}

}  // namespace
}  // namespace collwatch::trainer
