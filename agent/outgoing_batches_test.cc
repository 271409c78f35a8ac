// Unit tests of the agent's send queue: size and age bounds, acks, resend after a
// reconnect, trimming by the collector's resume points.
#include "agent/outgoing_batches.h"

#include "gtest/gtest.h"

namespace collwatch {
namespace {

v1::Event EventAt(uint32_t lane, uint64_t index) {
  v1::Event event;
  event.set_lane(lane);
  event.set_index(index);
  event.set_kind(v1::EVENT_KIND_ENTER);
  return event;
}

v1::StreamEventsRequest Stamp(v1::WriterStatus status) {
  v1::StreamEventsRequest stamp;
  stamp.set_writer_status(status);
  stamp.set_lost(3);
  stamp.mutable_process()->set_state(v1::PROCESS_STATE_STOPPED);
  stamp.mutable_process()->set_sampled_ns(77);
  if (status == v1::WRITER_STATUS_EXITED) {
    stamp.set_exit_recorded(true);
    stamp.set_exit_code(3);
  }
  return stamp;
}

constexpr uint64_t kMs = 1'000'000;

TEST(OutgoingBatchesTest, SealsByAgeAndBySize) {
  OutgoingBatches queue(BatchLimits{/*max_events=*/3, /*max_delay_ns=*/50 * kMs, 100});
  queue.Add(EventAt(0, 0), 0);
  EXPECT_FALSE(queue.SealIfDue(10 * kMs, false, Stamp(v1::WRITER_STATUS_RUNNING)));
  EXPECT_EQ(queue.NextToSend(), nullptr) << "nothing sealed before the delay";
  EXPECT_TRUE(queue.SealIfDue(50 * kMs, false, Stamp(v1::WRITER_STATUS_RUNNING)));
  auto first = queue.NextToSend();
  ASSERT_NE(first, nullptr);
  EXPECT_EQ(first->events_size(), 1);
  EXPECT_EQ(first->batch_seq(), 1u);
  EXPECT_EQ(first->lost(), 3u);
  // A full batch is sealed at once, without waiting.
  for (uint64_t i = 1; i <= 3; ++i) queue.Add(EventAt(0, i), 60 * kMs);
  auto second = queue.NextToSend();
  ASSERT_NE(second, nullptr);
  EXPECT_EQ(second->events_size(), 3);
  EXPECT_EQ(second->batch_seq(), 2u);
  EXPECT_EQ(second->writer_status(), v1::WRITER_STATUS_RUNNING) << "carries the last stamp";
  EXPECT_EQ(second->process().state(), v1::PROCESS_STATE_STOPPED) << "and the last look at the process";
  EXPECT_EQ(second->process().sampled_ns(), 77);
  EXPECT_EQ(queue.NextToSend(), nullptr);
  EXPECT_EQ(queue.unacked_events(), 4u);
}

TEST(OutgoingBatchesTest, StatusOnlyBatchWhenForced) {
  OutgoingBatches queue(BatchLimits{});
  EXPECT_TRUE(queue.SealIfDue(0, true, Stamp(v1::WRITER_STATUS_DEAD)));
  auto batch = queue.NextToSend();
  ASSERT_NE(batch, nullptr);
  EXPECT_EQ(batch->events_size(), 0);
  EXPECT_EQ(batch->writer_status(), v1::WRITER_STATUS_DEAD);
  EXPECT_EQ(batch->process().state(), v1::PROCESS_STATE_STOPPED);
  EXPECT_FALSE(batch->exit_recorded());
  EXPECT_TRUE(queue.SealIfDue(1, true, Stamp(v1::WRITER_STATUS_EXITED)));
  batch = queue.NextToSend();
  ASSERT_NE(batch, nullptr);
  EXPECT_TRUE(batch->exit_recorded());
  EXPECT_EQ(batch->exit_code(), 3);
}

TEST(OutgoingBatchesTest, AcksDropAndReconnectResendsTheRestRenumbered) {
  OutgoingBatches queue(BatchLimits{/*max_events=*/2, 50 * kMs, 100});
  for (uint64_t i = 0; i < 6; ++i) queue.Add(EventAt(1, i), 0);  // three full batches
  auto b1 = queue.NextToSend();
  auto b2 = queue.NextToSend();
  auto b3 = queue.NextToSend();
  ASSERT_NE(b3, nullptr);
  queue.Acked(1);
  EXPECT_EQ(queue.unacked_events(), 4u);
  // The connection breaks before acks 2 and 3: both go again, numbered from 1.
  queue.NewConnection();
  auto again = queue.NextToSend();
  ASSERT_NE(again, nullptr);
  EXPECT_EQ(again->batch_seq(), 1u);
  EXPECT_EQ(again->events(0).index(), 2u);
  auto again2 = queue.NextToSend();
  EXPECT_EQ(again2->batch_seq(), 2u);
  EXPECT_EQ(again2->events(0).index(), 4u);
  queue.Acked(2);
  EXPECT_TRUE(queue.Empty());
  EXPECT_EQ(queue.unacked_events(), 0u);
}

TEST(OutgoingBatchesTest, ResumeTrimsWhatTheCollectorHas) {
  OutgoingBatches queue(BatchLimits{/*max_events=*/4, 50 * kMs, 100});
  for (uint64_t i = 0; i < 4; ++i) queue.Add(EventAt(0, i), 0);  // sealed
  queue.Add(EventAt(2, 7), 0);                                   // open
  v1::StreamEventsResponse answer;
  v1::LaneResume* lane0 = answer.add_resume();
  lane0->set_lane(0);
  lane0->set_next_position(2 * 2 + 2);  // indices 0..2 of lane 0 stored
  queue.NewConnection();
  queue.ApplyResume(answer);
  EXPECT_EQ(queue.unacked_events(), 2u);
  auto batch = queue.NextToSend();
  ASSERT_NE(batch, nullptr);
  ASSERT_EQ(batch->events_size(), 1);
  EXPECT_EQ(batch->events(0).index(), 3u);
}

TEST(OutgoingBatchesTest, FullStopsReading) {
  OutgoingBatches queue(BatchLimits{/*max_events=*/2, 50 * kMs, /*max_unacked_events=*/4});
  for (uint64_t i = 0; i < 3; ++i) queue.Add(EventAt(0, i), 0);
  EXPECT_FALSE(queue.Full());
  queue.Add(EventAt(0, 3), 0);
  EXPECT_TRUE(queue.Full());
}

}  // namespace
}  // namespace collwatch
