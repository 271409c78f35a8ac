// The collector's input validation and job isolation over real connections
// (docs/security.md): hellos whose names could leave the store folder, identities that
// change mid-stream, absurd counts, events out of order and oversized messages are refused
// with a clear status; one job's stream never writes into another job's store; a stream
// over its event rate is stopped. Threading: single-threaded test code; the server runs
// on gRPC's threads.
#include <filesystem>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "collector/collector_service.h"
#include "collector/security_test_support.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "store/trace_store.h"

namespace collwatch::collector_input_test {
namespace {

// Every entry below `dir`, as paths relative to it.
std::set<std::string> Tree(const std::string& dir) {
  std::set<std::string> entries;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(dir)) {
    entries.insert(std::filesystem::relative(entry.path(), dir).string());
  }
  return entries;
}

// ---------------------------------------------------------------------------------------
// Input validation and job isolation

class CollectorInputTest : public ::testing::Test {
 protected:
  // A loopback collector that serves whichever job says hello first (no --job).
  void SetUp() override {
    CollectorOptions options = QuietOptions(Out());
    options.listen = "127.0.0.1:0";
    options.max_message_bytes = 1 << 20;
    auto server = CollectorServer::Start(options);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
    client_ = std::make_unique<Client>(server_->address(), grpc::InsecureChannelCredentials());
  }
  void TearDown() override { server_.reset(); }

  std::string Out() const { return dir_.path() + "/out"; }
  grpc::Status Stream(const std::vector<v1::StreamEventsRequest>& messages) { return client_->Stream(messages, ""); }

  // `status` is INVALID_ARGUMENT and its message contains `words`.
  static void ExpectInvalid(const grpc::Status& status, const std::string& words, const std::string& what) {
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << what << ": " << status.error_message();
    EXPECT_NE(status.error_message().find(words), std::string::npos) << what << ": " << status.error_message();
  }

  ScratchDir dir_;
  std::unique_ptr<CollectorServer> server_;
  std::unique_ptr<Client> client_;
};

// Job and host names become folder names: names that could climb out of the store are
// refused, nothing is created anywhere, and they do not decide which job is served.
TEST_F(CollectorInputTest, NamesThatCouldLeaveTheStoreAreRefused) {
  const std::set<std::string> before = Tree(dir_.path());
  const std::vector<std::pair<std::string, std::string>> hostile = {
      {"../escape", "node1"}, {"..", "node1"},     {".", "node1"},          {"/etc/escape", "node1"},
      {"a/../../b", "node1"}, {"job1", "../../h"}, {"job1", "h/../../x"},   {"job1", ".."},
      {"job\n1", "node1"},    {"job1", "a\\b"},    {std::string(300, 'j'), "node1"}, {"", "node1"}};
  for (const auto& [job, host] : hostile) {
    const grpc::Status status = Stream({Hello(Identity(job, host)), Batch(1, {0})});
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << job << " @ " << host;
    EXPECT_NE(status.error_message().find("name"), std::string::npos) << status.error_message();
  }
  EXPECT_EQ(Tree(dir_.path()), before) << "a refused hello created files";
  EXPECT_FALSE(std::filesystem::exists(std::filesystem::path(dir_.path()).parent_path() / "escape"));
  // The first valid hello picks the job; another job is refused from then on.
  EXPECT_TRUE(Stream({Hello(Identity("jobA")), Batch(1, {0})}).ok());
  const grpc::Status other = Stream({Hello(Identity("jobB")), Batch(1, {0})});
  EXPECT_EQ(other.error_code(), grpc::StatusCode::PERMISSION_DENIED) << other.error_message();
  EXPECT_NE(other.error_message().find("serves job 'jobA'"), std::string::npos) << other.error_message();
  EXPECT_EQ(ListRankTraces(Out(), "jobA").size(), 1u);
  EXPECT_TRUE(ListRankTraces(Out(), "jobB").empty());
}

// The store does not rely on the service's checks: whatever names it is handed, the
// trace folder is inside the output folder.
TEST_F(CollectorInputTest, StoreKeepsEveryNameInsideItsFolder) {
  TraceStore store(dir_.path() + "/store", StoreOptions{});
  for (const auto& [job, host] : std::vector<std::pair<std::string, std::string>>{
           {"../../escape", "../h"}, {"..", ".."}, {"/abs", "/abs"}, {"a/b/../../../c", "x/../../y"}}) {
    auto writer = store.Writer(Identity(job, host));
    ASSERT_TRUE(writer.ok()) << writer.status();
    const std::string trace = std::filesystem::weakly_canonical((*writer)->dir()).string();
    const std::string root = std::filesystem::weakly_canonical(dir_.path() + "/store").string() + "/";
    EXPECT_EQ(trace.compare(0, root.size(), root), 0) << job << " @ " << host << " -> " << trace;
  }
  for (const std::string& entry : Tree(dir_.path())) {
    if (entry == "out") continue;  // the fixture's collector's own (empty) store
    EXPECT_EQ(entry.rfind("store", 0), 0u) << entry << " outside the store";
  }
}

// A stream may not turn into another process, let alone another job, after its hello:
// the batch is refused and nothing of the other job is stored.
TEST_F(CollectorInputTest, IdentityChangingMidStreamIsRefused) {
  v1::StreamEventsRequest impostor = Batch(2, {5});
  *impostor.mutable_rank() = Identity("jobB");
  ExpectInvalid(Stream({Hello(Identity("jobA")), Batch(1, {0}), impostor}), "changed mid-stream", "job change");
  v1::StreamEventsRequest other_pid = Batch(2, {5});
  *other_pid.mutable_rank() = Identity("jobA", "node1", 101);
  ExpectInvalid(Stream({Hello(Identity("jobA")), Batch(1, {0}), other_pid}), "changed mid-stream", "pid change");
  EXPECT_TRUE(ListRankTraces(Out(), "jobB").empty());
  const auto traces = ListRankTraces(Out(), "jobA");
  ASSERT_EQ(traces.size(), 1u) << "only pid 100's trace";
  auto reader = RankTraceReader::Open(traces[0]);
  ASSERT_TRUE(reader.ok()) << reader.status();
  EXPECT_EQ((*reader)->identity().pid(), 100);
  EXPECT_EQ((*reader)->ReadAll()->size(), 1u) << "the impostor batches were stored";
}

TEST_F(CollectorInputTest, AbsurdCountsInTheHelloAreRefused) {
  auto with = [](auto change) {
    v1::RankIdentity identity = Identity("job1");
    change(&identity);
    return Hello(identity);
  };
  ExpectInvalid(Stream({with([](v1::RankIdentity* i) { i->set_lane_count(5000); })}), "lanes", "lanes");
  ExpectInvalid(Stream({with([](v1::RankIdentity* i) { i->set_pid(-3); })}), "pid", "pid");
  ExpectInvalid(Stream({with([](v1::RankIdentity* i) { i->set_world_size(1 << 30); })}), "world size", "world");
  ExpectInvalid(Stream({with([](v1::RankIdentity* i) { i->set_rank(-7); })}), "world size", "negative rank");
  ExpectInvalid(Stream({with([](v1::RankIdentity* i) { i->set_rank(9); })}), "world size", "rank >= world");
  ExpectInvalid(Stream({with([](v1::RankIdentity* i) { i->set_local_rank(-2); })}), "world size", "local rank");
  ExpectInvalid(Stream({with([](v1::RankIdentity* i) { i->set_ring_path(std::string(5000, 'r')); })}), "ring_path",
                "ring path");
  EXPECT_TRUE(!std::filesystem::exists(Out()) || Tree(Out()).empty()) << "a refused hello created files";
  // Unset ranks (-1) are fine.
  EXPECT_TRUE(Stream({with([](v1::RankIdentity* i) {
                i->set_rank(-1);
                i->set_world_size(-1);
                i->set_local_rank(-1);
              })}).ok());
}

// Records of a lane come in increasing position within a batch; one that goes back is
// refused and nothing of that batch is stored. Lanes may interleave.
TEST_F(CollectorInputTest, EventsOutOfOrderWithinALaneAreRefused) {
  ExpectInvalid(Stream({Hello(Identity("job1")), Batch(1, {4, 5, 3})}), "out of order", "backwards");
  ExpectInvalid(Stream({Hello(Identity("job1")), Batch(1, {2, 2})}), "out of order", "repeated");
  ExpectInvalid(Stream({Hello(Identity("job1")), Batch(1, {0}), Batch(2, {8, 1})}), "out of order", "second batch");
  auto traces = ListRankTraces(Out(), "job1");
  ASSERT_EQ(traces.size(), 1u);
  auto reader = RankTraceReader::Open(traces[0]);
  ASSERT_TRUE(reader.ok());
  EXPECT_EQ((*reader)->ReadAll()->size(), 1u) << "only the one good batch";

  v1::StreamEventsRequest interleaved = Batch(3, {10});  // lane 1: 10, 11; lane 2's 0 in between
  *interleaved.add_events() = Batch(0, {0}, /*lane=*/2).events(0);
  *interleaved.add_events() = Batch(0, {11}).events(0);
  EXPECT_TRUE(Stream({Hello(Identity("job1")), interleaved}).ok());
  // A resend after a reconnect (positions already stored) is not disorder: it is
  // deduplicated by the store.
  EXPECT_TRUE(Stream({Hello(Identity("job1")), Batch(1, {0, 10, 11, 12})}).ok());
  reader = RankTraceReader::Open(traces[0]);
  ASSERT_TRUE(reader.ok());
  EXPECT_EQ((*reader)->ReadAll()->size(), 5u);  // 0, 10, 11, lane 2's 0, 12
}

// Over the collector's message limit: gRPC's RESOURCE_EXHAUSTED with the sizes, and the
// collector serves the next stream as before.
TEST_F(CollectorInputTest, OversizedMessageIsRefusedWithItsSize) {
  v1::StreamEventsRequest huge = Batch(1, {0});
  v1::RegionName* region = huge.add_regions();
  region->set_id(1);
  region->set_name(std::string(2 << 20, 'x'));  // 2 MiB against the 1 MiB limit
  const grpc::Status status = Stream({Hello(Identity("job1")), huge});
  EXPECT_EQ(status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << status.error_message();
  EXPECT_NE(status.error_message().find("larger than max"), std::string::npos) << status.error_message();
  EXPECT_TRUE(Stream({Hello(Identity("job1")), Batch(1, {0})}).ok());
}

// A stream over its event rate (token bucket of one second) is stopped with
// RESOURCE_EXHAUSTED naming the limit; other streams go on.
TEST(CollectorLimitsTest, StreamOverItsEventRateIsRefused) {
  ScratchDir dir;
  CollectorOptions options = QuietOptions(dir.path() + "/out");
  options.listen = "127.0.0.1:0";
  options.max_events_per_second = 100;
  auto server = CollectorServer::Start(options);
  ASSERT_TRUE(server.ok()) << server.status();
  Client client((*server)->address(), grpc::InsecureChannelCredentials());
  std::vector<uint64_t> first(60);
  std::vector<uint64_t> second(60);
  for (uint64_t i = 0; i < 60; ++i) {
    first[i] = i;
    second[i] = 60 + i;
  }
  const grpc::Status status = client.Stream({Hello(Identity("job1")), Batch(1, first), Batch(2, second)}, "");
  EXPECT_EQ(status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << status.error_message();
  EXPECT_NE(status.error_message().find("100 events per second"), std::string::npos) << status.error_message();
  v1::RankIdentity other = Identity("job1", "node2");
  EXPECT_TRUE(client.Stream({Hello(other), Batch(1, {0})}, "").ok());
  (*server)->Shutdown();
}

}  // namespace
}  // namespace collwatch::collector_input_test
