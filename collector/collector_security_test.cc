// The collector's security rules over real connections (docs/security.md): a collector
// listening beyond loopback takes no StreamEvents or Watch call without its token, over
// plaintext or TLS; which addresses count as loopback; hellos whose names could leave the
// store folder, absurd counts, events out of order and oversized messages are refused
// with a clear status; one job's stream never writes into another job's store.
// (TLS itself: collector_service_test, TlsServesTlsClientsOnly.)
// Threading: single-threaded test code; the server runs on gRPC's threads.
#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "agent/agent.h"
#include "collector/collector_service.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "interposer/ring_writer.h"
#include "store/trace_store.h"

namespace collwatch {
namespace {

constexpr char kToken[] = "7f3a9c1e-collwatch-test-token";

// A fresh folder under the system's temporary folder, removed afterwards.
class ScratchDir {
 public:
  ScratchDir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "collwatch-security-XXXXXX").string();
    path_ = mkdtemp(pattern.data());
  }
  ~ScratchDir() { std::filesystem::remove_all(path_); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// Every entry below `dir`, as paths relative to it.
std::set<std::string> Tree(const std::string& dir) {
  std::set<std::string> entries;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(dir)) {
    entries.insert(std::filesystem::relative(entry.path(), dir).string());
  }
  return entries;
}

v1::RankIdentity Identity(const std::string& job, const std::string& host = "node1", int pid = 100) {
  v1::RankIdentity identity;
  identity.set_job(job);
  identity.set_host(host);
  identity.set_pid(pid);
  identity.set_rank(0);
  identity.set_world_size(4);
  identity.set_lane_count(4);
  identity.set_start_realtime_ns(5);
  return identity;
}

v1::StreamEventsRequest Hello(const v1::RankIdentity& identity) {
  v1::StreamEventsRequest hello;
  *hello.mutable_rank() = identity;
  return hello;
}

// A batch of `indices` on `lane` (in the order given).
v1::StreamEventsRequest Batch(uint64_t batch_seq, const std::vector<uint64_t>& indices, uint32_t lane = 1) {
  v1::StreamEventsRequest batch;
  batch.set_batch_seq(batch_seq);
  for (uint64_t index : indices) {
    v1::Event* event = batch.add_events();
    event->set_lane(lane);
    event->set_index(index);
    event->set_kind(v1::EVENT_KIND_ENTER);
    event->set_fn(1);
    event->set_comm_id(9);
    event->set_seq(index + 1);
  }
  batch.set_writer_status(v1::WRITER_STATUS_RUNNING);
  return batch;
}

// A client of one collector address.
class Client {
 public:
  Client(const std::string& address, std::shared_ptr<grpc::ChannelCredentials> credentials,
         const grpc::ChannelArguments& arguments = {})
      : stub_(v1::Collector::NewStub(grpc::CreateCustomChannel(address, credentials, arguments))) {}

  // Sends `messages` on one StreamEvents call (with `token` unless empty); the final status.
  grpc::Status Stream(const std::vector<v1::StreamEventsRequest>& messages, const std::string& token) {
    grpc::ClientContext context;
    if (!token.empty()) context.AddMetadata(kTokenMetadataKey, token);
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    auto stream = stub_->StreamEvents(&context);
    v1::StreamEventsResponse answer;
    for (const v1::StreamEventsRequest& message : messages) {
      if (!stream->Write(message) || !stream->Read(&answer)) break;
    }
    stream->WritesDone();
    while (stream->Read(&answer)) {
    }
    return stream->Finish();
  }

  // Opens Watch, reads the first state if any, hangs up; the final status (OK after a
  // state was read: the hang-up is ours).
  grpc::Status WatchOnce(const std::string& token, v1::WatchResponse* first) {
    grpc::ClientContext context;
    if (!token.empty()) context.AddMetadata(kTokenMetadataKey, token);
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    auto reader = stub_->Watch(&context, v1::WatchRequest());
    const bool got_state = reader->Read(first);
    if (got_state) context.TryCancel();  // else the server has finished the call: keep its status
    v1::WatchResponse rest;
    while (reader->Read(&rest)) {
    }
    const grpc::Status status = reader->Finish();
    return got_state ? grpc::Status::OK : status;
  }

 private:
  std::unique_ptr<v1::Collector::Stub> stub_;
};

// An IPv4 address of this machine that is not loopback, or "" when it has none.
std::string NonLoopbackAddress() {
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return "";
  std::string found;
  for (ifaddrs* item = list; item != nullptr && found.empty(); item = item->ifa_next) {
    if (item->ifa_addr == nullptr || item->ifa_addr->sa_family != AF_INET) continue;
    if ((item->ifa_flags & IFF_UP) == 0 || (item->ifa_flags & IFF_LOOPBACK) != 0) continue;
    char text[INET_ADDRSTRLEN];
    const auto* v4 = reinterpret_cast<const sockaddr_in*>(item->ifa_addr);
    if (inet_ntop(AF_INET, &v4->sin_addr, text, sizeof text) != nullptr) found = text;
  }
  freeifaddrs(list);
  return found;
}

std::string ReadTlsFile(const std::string& name) {
  std::ifstream file(std::string(COLLWATCH_TEST_DATA_DIR) + "/tls/" + name);
  return std::string(std::istreambuf_iterator<char>(file), std::istreambuf_iterator<char>());
}

CollectorOptions QuietOptions(const std::string& out_dir) {
  CollectorOptions options;
  options.out_dir = out_dir;
  options.log = false;
  options.analyze = false;
  options.watch_interval_s = 0.05;
  return options;
}

// ---------------------------------------------------------------------------------------
// Token and address rules

// A collector on every interface (0.0.0.0), reached through this machine's own
// non-loopback address where it has one: without the token, or with a wrong one (a
// prefix, one byte off, one byte longer), neither StreamEvents nor Watch gets anywhere
// and nothing is stored.
TEST(CollectorTokenTest, WildcardListenerRefusesCallsWithoutTheRightToken) {
  ScratchDir dir;
  CollectorOptions options = QuietOptions(dir.path() + "/out");
  options.listen = "0.0.0.0:0";
  ASSERT_FALSE(CollectorServer::Start(options).ok()) << "no token: must refuse to listen";
  options.token = kToken;
  auto server = CollectorServer::Start(options);
  ASSERT_TRUE(server.ok()) << server.status();
  const std::string port = (*server)->address().substr((*server)->address().rfind(':') + 1);
  const std::string host = NonLoopbackAddress();
  Client client((host.empty() ? "127.0.0.1" : host) + ":" + port, grpc::InsecureChannelCredentials());

  const std::string token = kToken;
  std::string one_byte_off = token;
  one_byte_off.back() ^= 1;
  const std::vector<std::string> wrong = {"", token.substr(0, token.size() - 1), one_byte_off, token + "x"};
  for (const std::string& attempt : wrong) {
    const grpc::Status stream = client.Stream({Hello(Identity("job1")), Batch(1, {0, 1})}, attempt);
    EXPECT_EQ(stream.error_code(), grpc::StatusCode::UNAUTHENTICATED) << "token '" << attempt << "'";
    EXPECT_NE(stream.error_message().find("token"), std::string::npos) << stream.error_message();
    v1::WatchResponse state;
    const grpc::Status watch = client.WatchOnce(attempt, &state);
    EXPECT_EQ(watch.error_code(), grpc::StatusCode::UNAUTHENTICATED) << "token '" << attempt << "'";
    EXPECT_NE(watch.error_message().find("token"), std::string::npos) << watch.error_message();
  }
  EXPECT_TRUE(ListRankTraces(options.out_dir, "job1").empty()) << "an unauthenticated stream was stored";

  const grpc::Status accepted = client.Stream({Hello(Identity("job1")), Batch(1, {0, 1})}, token);
  EXPECT_TRUE(accepted.ok()) << accepted.error_message();
  EXPECT_EQ(ListRankTraces(options.out_dir, "job1").size(), 1u);
  v1::WatchResponse state;
  ASSERT_TRUE(client.WatchOnce(token, &state).ok());
  EXPECT_EQ(state.state().job(), "job1");
  (*server)->Shutdown();
}

// TLS hides the token on the wire; it does not replace it: a client that trusts the
// certificate still needs the token for both calls.
TEST(CollectorTokenTest, TlsDoesNotStandInForTheToken) {
  ScratchDir dir;
  CollectorOptions options = QuietOptions(dir.path() + "/out");
  options.listen = "0.0.0.0:0";
  options.token = kToken;
  options.tls_cert_pem = ReadTlsFile("test-cert.pem");
  options.tls_key_pem = ReadTlsFile("test-key.pem");
  ASSERT_FALSE(options.tls_cert_pem.empty()) << "test certificate missing";
  auto server = CollectorServer::Start(options);
  ASSERT_TRUE(server.ok()) << server.status();
  const std::string port = (*server)->address().substr((*server)->address().rfind(':') + 1);
  const std::string host = NonLoopbackAddress();
  grpc::SslCredentialsOptions trusted;
  trusted.pem_root_certs = options.tls_cert_pem;
  grpc::ChannelArguments arguments;
  arguments.SetSslTargetNameOverride("localhost");  // the test certificate's name
  Client client((host.empty() ? "127.0.0.1" : host) + ":" + port, grpc::SslCredentials(trusted), arguments);

  for (const std::string& attempt : {std::string(), std::string("wrong")}) {
    EXPECT_EQ(client.Stream({Hello(Identity("job1"))}, attempt).error_code(), grpc::StatusCode::UNAUTHENTICATED);
    v1::WatchResponse state;
    EXPECT_EQ(client.WatchOnce(attempt, &state).error_code(), grpc::StatusCode::UNAUTHENTICATED);
  }
  EXPECT_TRUE(client.Stream({Hello(Identity("job1")), Batch(1, {0})}, kToken).ok());
  v1::WatchResponse state;
  EXPECT_TRUE(client.WatchOnce(kToken, &state).ok());
  (*server)->Shutdown();
}

// Loopback is decided from IP literals: a host name that merely starts with "127." could
// resolve to any address, so it needs a token like any other.
TEST(CollectorTokenTest, OnlyLoopbackLiteralsCountAsLoopback) {
  for (const char* address : {"127.0.0.1:7777", "127.8.9.10:1", "localhost:7777", "[::1]:7777", "ipv4:127.0.0.1:1",
                              "ipv6:[::1]:1", "unix:/tmp/collwatch.sock", "unix-abstract:collwatch"}) {
    EXPECT_TRUE(IsLoopbackAddress(address)) << address;
  }
  for (const char* address : {"127.example.com:7777", "127.0.0.1.nip.io:7777", "localhost.example.com:1", "0.0.0.0:7777",
                              "[::]:7777", "10.0.0.1:7777", "[::ffff:10.0.0.1]:1", "ipv4:10.0.0.1:1", "128.0.0.1:1",
                              "example.com:7777", "127.0.0.1", ":7777"}) {
    EXPECT_FALSE(IsLoopbackAddress(address)) << address;
  }
  ScratchDir dir;
  CollectorOptions options = QuietOptions(dir.path() + "/out");
  options.listen = "127.attacker.example:0";
  auto server = CollectorServer::Start(options);
  ASSERT_FALSE(server.ok());
  EXPECT_EQ(server.status().code(), absl::StatusCode::kInvalidArgument) << server.status();
  EXPECT_NE(server.status().message().find("without a token"), std::string::npos) << server.status();
}

TEST(CollectorTokenTest, TokenComparisonIsExact) {
  EXPECT_TRUE(ConstantTimeEquals(kToken, kToken));
  EXPECT_TRUE(ConstantTimeEquals("", ""));
  EXPECT_FALSE(ConstantTimeEquals("", kToken));
  EXPECT_FALSE(ConstantTimeEquals(kToken, ""));
  const std::string token = kToken;
  EXPECT_FALSE(ConstantTimeEquals(token.substr(0, 5), token));
  EXPECT_FALSE(ConstantTimeEquals(token + '\0', token));  // a NUL does not end the comparison
  EXPECT_FALSE(ConstantTimeEquals(token, token + '\0'));
  std::string first_off = token;
  first_off.front() ^= 0x20;
  EXPECT_FALSE(ConstantTimeEquals(first_off, token));
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

// The agent ships rings only from a folder private to its user: one opened to others
// (0755), or a symlink to a private one, is skipped; the same rings are shipped once the
// folder is private again.
TEST(AgentRingFolderTest, ShipsOnlyFromAPrivateFolder) {
  ScratchDir dir;
  const std::string rings = dir.path() + "/rings";
  Config config;
  std::snprintf(config.ring_dir, sizeof config.ring_dir, "%s", rings.c_str());
  std::snprintf(config.job, sizeof config.job, "agentjob");
  config.ring_records = 64;
  std::unique_ptr<RingWriter> writer = RingWriter::Create(config);
  ASSERT_NE(writer, nullptr);
  ring::Record record{};
  record.kind = static_cast<uint16_t>(ring::RecordKind::kEnter);
  record.fn = static_cast<uint16_t>(ring::ApiFn::kAllReduce);
  record.comm_id = 7;
  record.seq = 1;
  writer->Append(RingWriter::kSharedLane, record);
  ASSERT_EQ(chmod(rings.c_str(), 0755), 0);
  const std::string link = dir.path() + "/rings-link";
  ASSERT_EQ(symlink(rings.c_str(), link.c_str()), 0);

  CollectorOptions collector_options = QuietOptions(dir.path() + "/out");
  collector_options.listen = "127.0.0.1:0";
  auto server = CollectorServer::Start(collector_options);
  ASSERT_TRUE(server.ok()) << server.status();
  auto start_agent = [&](const std::string& ring_dir) {
    AgentOptions options;
    options.collector = (*server)->address();
    options.ring_dir = ring_dir;
    options.job = "agentjob";
    options.log = false;
    return Agent::Start(options);
  };
  // Open to others: nothing shipped over five rescans.
  auto open_folder = start_agent(rings);
  ASSERT_TRUE(open_folder.ok());
  std::this_thread::sleep_for(std::chrono::seconds(1));
  EXPECT_EQ((*open_folder)->Stats().rings, 0);
  EXPECT_TRUE(ListRankTraces(collector_options.out_dir, "agentjob").empty());

  // Private again: shipped from the folder itself, never through the symlink to it.
  ASSERT_EQ(chmod(rings.c_str(), 0700), 0);
  auto through_link = start_agent(link);
  ASSERT_TRUE(through_link.ok());
  bool shipped = false;
  for (int i = 0; i < 1000 && !shipped; ++i) {  // up to 20 s on a loaded machine
    shipped = !ListRankTraces(collector_options.out_dir, "agentjob").empty();
    if (!shipped) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_TRUE(shipped) << "the agent did not ship from the private folder";
  EXPECT_EQ((*open_folder)->Stats().rings, 1);
  std::this_thread::sleep_for(std::chrono::seconds(1));
  EXPECT_EQ((*through_link)->Stats().rings, 0) << "a symlinked folder was followed";
  (*open_folder)->Stop();
  (*through_link)->Stop();
  (*server)->Shutdown();
}

}  // namespace
}  // namespace collwatch
