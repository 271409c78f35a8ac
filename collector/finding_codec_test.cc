// A finding survives the trip through the proto (Watch, `collwatch run --collector`,
// the dashboard): every field, its processes, each kind; what the wire cannot carry is
// made safe. Threading: single-threaded.
#include "collector/finding_codec.h"

#include <string>
#include <vector>

#include "google/protobuf/descriptor.h"
#include "google/protobuf/message.h"
#include "gtest/gtest.h"

namespace collwatch::finding_codec_test {
namespace {

constexpr int64_t kNow = 1'700'000'000'000'000'000;

TEST(FindingProtoTest, ProcessesSurviveTheRoundTrip) {
  analyzer::Finding finding;
  finding.kind = analyzer::FindingKind::kTransportStall;
  finding.comm_id = 0x3f2a9c0100000001ull;
  finding.seq = 7;
  finding.lagging_ranks = {1};
  analyzer::ProcessReport stopped;
  stopped.rank = 1;
  stopped.global_rank = 5;
  stopped.pid = 4242;
  stopped.host = "node0";
  stopped.state = "stopped";
  stopped.cpu_advancing = false;
  stopped.heartbeat_age_s = 12.5;
  stopped.heartbeat_fresh = false;
  analyzer::ProcessReport ended;
  ended.rank = 0;
  ended.pid = 4241;
  ended.host = "node1";
  ended.state = "gone";
  ended.cpu_advancing = true;
  ended.heartbeat_fresh = true;
  ended.ended = "exited with 1";
  finding.processes = {stopped, ended};

  v1::Finding wire;
  FindingToProto(finding, &wire);
  v1::Finding parsed;
  ASSERT_TRUE(parsed.ParseFromString(wire.SerializeAsString()));
  const analyzer::Finding back = FindingFromProto(parsed);
  ASSERT_EQ(back.processes.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    const analyzer::ProcessReport& want = finding.processes[i];
    const analyzer::ProcessReport& got = back.processes[i];
    EXPECT_EQ(got.rank, want.rank);
    EXPECT_EQ(got.global_rank, want.global_rank);
    EXPECT_EQ(got.pid, want.pid);
    EXPECT_EQ(got.host, want.host);
    EXPECT_EQ(got.state, want.state);
    EXPECT_EQ(got.cpu_advancing, want.cpu_advancing);
    EXPECT_DOUBLE_EQ(got.heartbeat_age_s, want.heartbeat_age_s);
    EXPECT_EQ(got.heartbeat_fresh, want.heartbeat_fresh);
    EXPECT_EQ(got.ended, want.ended);
  }
  EXPECT_EQ(back.processes[1].global_rank, -1);
}

// A finding with every field set, each to a value of its own.
analyzer::Finding EveryFieldSet() {
  analyzer::Finding finding;
  finding.kind = analyzer::FindingKind::kSkippedReduceScatter;
  finding.decided = false;
  finding.other_readings = {analyzer::FindingKind::kPathDivergence, analyzer::FindingKind::kSignatureMismatch};
  finding.comm_id = 0x3f2a9c0100000001ull;
  finding.seq = 31;
  finding.rank_classes = {{{0, 2}, "reduce-scattered bwd/trunk.expert1"}, {{1, 3}, "skipped it"}};
  finding.lagging_ranks = {3, 1};
  finding.regions = {"bwd/trunk.expert1", "bwd/trunk.block7"};
  finding.detect_latency_s = 0.25;
  finding.headline = "SKIPPED_REDUCE_SCATTER comm 3f2a9c01 seq 31: ranks 1,3 did not reduce-scatter";
  finding.brief = "comm 3f2a9c01 seq 31: ranks 1,3 did not reduce-scatter";
  finding.summary = "Ranks 1,3 skipped the reduce-scatter of bwd/trunk.expert1.";
  finding.first_bad_ns = kNow;
  finding.found_ns = kNow + 250'000'000;  // first_bad_ns + detect_latency_s: all the wire keeps
  finding.context = {{{0, 2}, {"  = 30 all-gather 32.0 MiB in bwd/trunk.expert1", "  > 31 reduce-scatter"}},
                     {{1, 3}, {"  > 31 all-gather 32.0 MiB in bwd/trunk.block7"}}};
  analyzer::ProcessReport process;
  process.rank = 3;
  process.global_rank = 7;
  process.pid = 4243;
  process.host = "node1";
  process.state = "sleeping in futex_wait_queue";
  process.cpu_advancing = true;
  process.heartbeat_age_s = 0.75;
  process.heartbeat_fresh = true;
  process.ended = "exited with 1";
  finding.processes = {process};
  finding.call_paths = {{{0, 2}, CallPath{{{"/home/me/model.py", "Model.forward", 306}}, true}, true}};
  finding.branch_point = analyzer::BranchPoint{"Model.forward", "/home/me/model.py",
                                               {{{0, 2}, 306, "VisionTower.forward", "x = self.vision(x)"}}};
  finding.first_parted = analyzer::BranchPoint{"step", "/home/me/train.py", {{{1, 3}, 12, "Model.forward", "loss = m(x)"}}};
  finding.stacks = analyzer::FindingStacks{
      1'700'000'001'000'000'000,
      {{{0, 1, 2}, {11, 12, 13}, "python3 (main thread)", "sleeping in poll (libc.so.6) \u2190 train (train.py:88)"},
       {{3}, {14}, "python3 (main thread)", "sleeping in clock_nanosleep (libc.so.6) \u2190 late (train.py:20)"}},
      true};
  // A stall that resolved later (a straggler): the times the wire carries.
  finding.resolution = analyzer::StallResolution{finding.found_ns + 2'500'000'000, 2.5, 12.75};
  // The rank it waits for streamed as another job, refused by the collector.
  finding.refused_streams = {{.job = "run-other", .host = "node-b", .pid = 4242, .rank = 3}};
  return finding;
}

// Fields of `message` (and of the messages in it) left at their default: the names of
// proto fields no conversion fills.
std::vector<std::string> UnsetFields(const google::protobuf::Message& message) {
  std::vector<std::string> unset;
  const google::protobuf::Descriptor* descriptor = message.GetDescriptor();
  const google::protobuf::Reflection* reflection = message.GetReflection();
  for (int i = 0; i < descriptor->field_count(); ++i) {
    const google::protobuf::FieldDescriptor* field = descriptor->field(i);
    if (field->is_repeated()) {
      const int size = reflection->FieldSize(message, field);
      if (size == 0) unset.push_back(field->full_name());
      if (field->cpp_type() == google::protobuf::FieldDescriptor::CPPTYPE_MESSAGE) {
        for (int item = 0; item < size; ++item) {
          for (std::string& name : UnsetFields(reflection->GetRepeatedMessage(message, field, item))) {
            unset.push_back(std::move(name));
          }
        }
      }
    } else if (!reflection->HasField(message, field)) {
      unset.push_back(field->full_name());
    }
  }
  return unset;
}

TEST(FindingProtoTest, EveryFieldSurvivesTheRoundTrip) {
  const analyzer::Finding finding = EveryFieldSet();
  v1::Finding wire;
  FindingToProto(finding, &wire);
  v1::Finding parsed;
  ASSERT_TRUE(parsed.ParseFromString(wire.SerializeAsString()));
  const analyzer::Finding back = FindingFromProto(parsed);
  EXPECT_EQ(back.kind, finding.kind);
  EXPECT_EQ(back.decided, finding.decided);
  EXPECT_EQ(back.other_readings, finding.other_readings);
  EXPECT_EQ(back.comm_id, finding.comm_id);
  EXPECT_EQ(back.seq, finding.seq);
  ASSERT_EQ(back.rank_classes.size(), finding.rank_classes.size());
  for (size_t i = 0; i < finding.rank_classes.size(); ++i) {
    EXPECT_EQ(back.rank_classes[i].ranks, finding.rank_classes[i].ranks);
    EXPECT_EQ(back.rank_classes[i].label, finding.rank_classes[i].label);
  }
  EXPECT_EQ(back.lagging_ranks, finding.lagging_ranks);
  EXPECT_EQ(back.regions, finding.regions);
  EXPECT_DOUBLE_EQ(back.detect_latency_s, finding.detect_latency_s);
  EXPECT_EQ(back.headline, finding.headline);
  EXPECT_EQ(back.brief, finding.brief);
  EXPECT_EQ(back.summary, finding.summary);
  EXPECT_EQ(back.first_bad_ns, finding.first_bad_ns);
  EXPECT_EQ(back.found_ns, finding.found_ns);
  ASSERT_EQ(back.context.size(), finding.context.size());
  for (size_t i = 0; i < finding.context.size(); ++i) {
    EXPECT_EQ(back.context[i].ranks, finding.context[i].ranks);
    EXPECT_EQ(back.context[i].lines, finding.context[i].lines);
  }
  ASSERT_EQ(back.processes.size(), 1u);
  EXPECT_EQ(back.processes[0].rank, 3);
  EXPECT_EQ(back.processes[0].global_rank, 7);
  EXPECT_EQ(back.processes[0].pid, 4243);
  EXPECT_EQ(back.processes[0].host, "node1");
  EXPECT_EQ(back.processes[0].state, "sleeping in futex_wait_queue");
  EXPECT_TRUE(back.processes[0].cpu_advancing);
  EXPECT_DOUBLE_EQ(back.processes[0].heartbeat_age_s, 0.75);
  EXPECT_TRUE(back.processes[0].heartbeat_fresh);
  EXPECT_EQ(back.processes[0].ended, "exited with 1");
  ASSERT_EQ(back.call_paths.size(), 1u);
  EXPECT_EQ(back.call_paths[0].ranks, finding.call_paths[0].ranks);
  EXPECT_EQ(back.call_paths[0].path, finding.call_paths[0].path);
  EXPECT_TRUE(back.call_paths[0].inferred);
  ASSERT_TRUE(back.branch_point && back.first_parted);
  EXPECT_EQ(analyzer::BranchPointText(*back.branch_point), analyzer::BranchPointText(*finding.branch_point));
  EXPECT_EQ(analyzer::BranchPointText(*back.first_parted), analyzer::BranchPointText(*finding.first_parted));
  EXPECT_EQ(back.branch_point->file, finding.branch_point->file);
  EXPECT_EQ(back.stacks, finding.stacks);
  EXPECT_EQ(back.resolution, finding.resolution);
  EXPECT_EQ(back.refused_streams, finding.refused_streams);
}

// A field added to the proto's Finding (or to a message in it) that FindingToProto does
// not fill shows here.
TEST(FindingProtoTest, EveryProtoFieldIsFilledFromAFullFinding) {
  v1::Finding wire;
  FindingToProto(EveryFieldSet(), &wire);
  EXPECT_EQ(UnsetFields(wire), std::vector<std::string>{});
}

// Kinds cross by value: each value names the same kind on both sides.
TEST(FindingProtoTest, EachKindIsTheProtoKindOfTheSameName) {
  for (int value = 1; value <= 11; ++value) {
    const auto kind = static_cast<analyzer::FindingKind>(value);
    ASSERT_TRUE(v1::FindingKind_IsValid(value)) << value;
    EXPECT_EQ(v1::FindingKind_Name(static_cast<v1::FindingKind>(value)), analyzer::FindingKindName(kind));
    analyzer::Finding finding;
    finding.kind = kind;
    finding.other_readings = {kind};
    v1::Finding wire;
    FindingToProto(finding, &wire);
    EXPECT_EQ(static_cast<int>(wire.kind()), value);
    EXPECT_EQ(FindingFromProto(wire).kind, kind);
    EXPECT_EQ(FindingFromProto(wire).other_readings, std::vector<analyzer::FindingKind>{kind});
  }
  EXPECT_FALSE(v1::FindingKind_IsValid(12)) << "a proto kind the analyzer does not have";
}

// What the wire cannot carry as it is: a time before the epoch is sent as 0, a host or
// state that is not UTF-8 as valid UTF-8; a decided finding is not undecided.
TEST(FindingProtoTest, WhatTheWireCannotCarryIsMadeSafe) {
  analyzer::Finding finding;
  finding.first_bad_ns = -5;
  analyzer::ProcessReport process;
  process.host = "node\xff";
  process.state = "sleeping in \xfe";
  finding.processes = {process};
  v1::Finding wire;
  FindingToProto(finding, &wire);
  EXPECT_EQ(wire.first_bad_t_ns(), 0u);
  EXPECT_FALSE(wire.undecided());
  ASSERT_EQ(wire.processes_size(), 1);
  EXPECT_EQ(wire.processes(0).host(), "node\xef\xbf\xbd");
  EXPECT_EQ(wire.processes(0).state(), "sleeping in \xef\xbf\xbd");
  v1::Finding parsed;
  EXPECT_TRUE(parsed.ParseFromString(wire.SerializeAsString()));
  EXPECT_TRUE(FindingFromProto(parsed).decided);
}

}  // namespace
}  // namespace collwatch::finding_codec_test
