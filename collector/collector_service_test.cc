// The collector service over a real loopback connection: acks and resume points, and
// clear statuses for bad input (no hello, wrong job, bad token, oversized message,
// identity change, malformed event) and for an unsafe listen address.
#include "collector/collector_service.h"

#include <chrono>
#include <filesystem>
#include <fstream>

#include "collector/security_test_support.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"

namespace collwatch::collector_service_test {
namespace {

class CollectorServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/collwatch-service-XXXXXX";
    out_ = mkdtemp(pattern);
    CollectorOptions options;
    options.listen = "127.0.0.1:0";
    options.out_dir = out_;
    options.token = "s3cret";
    options.job = "job1";
    options.max_message_bytes = 64 << 10;
    options.max_events_per_batch = 100;
    options.watch_interval_s = 0.05;
    options.log = false;
    auto server = CollectorServer::Start(options);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
    stub_ = v1::Collector::NewStub(grpc::CreateChannel(server_->address(), grpc::InsecureChannelCredentials()));
  }
  void TearDown() override {
    server_.reset();
    std::filesystem::remove_all(out_);
  }

  static v1::RankIdentity Identity(const std::string& job = "job1") {
    v1::RankIdentity identity;
    identity.set_job(job);
    identity.set_host("node1");
    identity.set_pid(100);
    identity.set_rank(0);
    identity.set_lane_count(4);
    identity.set_start_realtime_ns(5);
    return identity;
  }
  static v1::StreamEventsRequest Batch(uint64_t seq, uint64_t first, int count) {
    v1::StreamEventsRequest batch;
    batch.set_batch_seq(seq);
    for (int i = 0; i < count; ++i) {
      v1::Event* event = batch.add_events();
      event->set_lane(1);
      event->set_index(first + static_cast<uint64_t>(i));
      event->set_kind(v1::EVENT_KIND_ENTER);
      event->set_fn(1);
      event->set_comm_id(9);
      event->set_seq(first + static_cast<uint64_t>(i) + 1);
    }
    batch.set_writer_status(v1::WRITER_STATUS_RUNNING);
    return batch;
  }

  // Sends `messages` on one stream (token `token`), collects the answers, returns the
  // final status.
  grpc::Status Exchange(const std::vector<v1::StreamEventsRequest>& messages,
                        std::vector<v1::StreamEventsResponse>* answers, const std::string& token = "s3cret") {
    grpc::ClientContext context;
    if (!token.empty()) context.AddMetadata(kTokenMetadataKey, token);
    auto stream = stub_->StreamEvents(&context);
    for (const v1::StreamEventsRequest& message : messages) {
      if (!stream->Write(message)) break;
      v1::StreamEventsResponse answer;
      if (!stream->Read(&answer)) break;
      if (answers != nullptr) answers->push_back(answer);
    }
    stream->WritesDone();
    v1::StreamEventsResponse rest;
    while (stream->Read(&rest)) {
    }
    return stream->Finish();
  }

  v1::StreamEventsRequest Hello(const std::string& job = "job1") {
    v1::StreamEventsRequest hello;
    *hello.mutable_rank() = Identity(job);
    return hello;
  }

  std::string out_;
  std::unique_ptr<CollectorServer> server_;
  std::unique_ptr<v1::Collector::Stub> stub_;
};

TEST_F(CollectorServiceTest, AcksBatchesAndAnswersHelloWithResumePoints) {
  std::vector<v1::StreamEventsResponse> answers;
  grpc::Status status = Exchange({Hello(), Batch(1, 0, 10), Batch(2, 10, 5)}, &answers);
  ASSERT_TRUE(status.ok()) << status.error_message();
  ASSERT_EQ(answers.size(), 3u);
  EXPECT_EQ(answers[0].resume_size(), 0);
  EXPECT_EQ(answers[1].acked_batch_seq(), 1u);
  EXPECT_EQ(answers[2].acked_batch_seq(), 2u);

  // A second stream of the same process (after a reconnect) learns what is stored, and
  // its resend is deduplicated.
  answers.clear();
  status = Exchange({Hello(), Batch(1, 5, 20)}, &answers);
  ASSERT_TRUE(status.ok()) << status.error_message();
  ASSERT_EQ(answers[0].resume_size(), 1);
  EXPECT_EQ(answers[0].resume(0).lane(), 1u);
  EXPECT_EQ(answers[0].resume(0).next_position(), 2u * 14 + 2);
  auto traces = ListRankTraces(out_, "job1");
  ASSERT_EQ(traces.size(), 1u);
  auto reader = RankTraceReader::Open(traces[0]);
  ASSERT_TRUE(reader.ok());
  EXPECT_EQ((*reader)->ReadAll()->size(), 25u);

  const LiveSummary summary = server_->service().live_state().Summary();
  EXPECT_EQ(summary.ranks_known, 1);
  EXPECT_EQ(summary.events, 25u);
}

// `collwatch top`'s stacks key: every connected stream's next answer asks its agent for
// its process's stacks, and the stacks that come back are the job's in the state.
TEST_F(CollectorServiceTest, TakeStacksAsksEveryConnectedStreamInItsNextAnswer) {
  grpc::ClientContext context;
  context.AddMetadata(kTokenMetadataKey, "s3cret");
  auto stream = stub_->StreamEvents(&context);
  v1::StreamEventsResponse answer;
  ASSERT_TRUE(stream->Write(Hello()) && stream->Read(&answer));
  ASSERT_TRUE(stream->Write(Batch(1, 0, 2)) && stream->Read(&answer));
  EXPECT_FALSE(answer.has_take_stacks());

  grpc::ClientContext ask_context;
  ask_context.AddMetadata(kTokenMetadataKey, "s3cret");
  v1::TakeStacksRequest ask;
  v1::TakeStacksResponse asked;
  ASSERT_TRUE(stub_->TakeStacks(&ask_context, ask, &asked).ok());
  EXPECT_EQ(asked.processes(), 1);
  ASSERT_TRUE(stream->Write(Batch(2, 2, 2)) && stream->Read(&answer));
  ASSERT_TRUE(answer.has_take_stacks());
  EXPECT_GT(answer.take_stacks().request_id(), 0u);

  v1::StreamEventsRequest reply = Batch(3, 4, 1);
  v1::ProcessStacks* stacks = reply.mutable_stacks();
  stacks->set_request_id(answer.take_stacks().request_id());
  stacks->set_pid(4242);
  stacks->set_taken_ns(1'700'000'000'000'000'000);
  v1::ThreadStack* thread = stacks->add_threads();
  thread->set_tid(4242);
  thread->set_name("python3");
  thread->set_state("S");
  v1::NativeFrame* frame = thread->add_native();
  frame->set_function("clock_nanosleep");
  frame->set_module("libc.so.6");
  ASSERT_TRUE(stream->Write(reply) && stream->Read(&answer));
  EXPECT_FALSE(answer.has_take_stacks()) << "asked once";
  const v1::ClusterState state = server_->service().live_state().Snapshot("job1");
  ASSERT_EQ(state.stacks().classes_size(), 1) << state.DebugString();
  EXPECT_EQ(state.stacks().classes(0).where(), "sleeping in clock_nanosleep (libc.so.6)");
  stream->WritesDone();
  while (stream->Read(&answer)) {
  }
  EXPECT_TRUE(stream->Finish().ok());

  grpc::ClientContext wrong_context;
  wrong_context.AddMetadata(kTokenMetadataKey, "wrong");
  EXPECT_EQ(stub_->TakeStacks(&wrong_context, ask, &asked).error_code(), grpc::StatusCode::UNAUTHENTICATED);
}

TEST_F(CollectorServiceTest, FirstMessageMustBeAHello) {
  grpc::Status status = Exchange({Batch(1, 0, 1)}, nullptr);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(status.error_message().find("hello"), std::string::npos) << status.error_message();
}

TEST_F(CollectorServiceTest, EventsOfAnotherJobAreRefused) {
  grpc::Status status = Exchange({Hello("job2")}, nullptr);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_NE(status.error_message().find("serves job 'job1'"), std::string::npos) << status.error_message();
  EXPECT_TRUE(ListRankTraces(out_, "job2").empty());
}

TEST_F(CollectorServiceTest, MissingOrWrongTokenIsUnauthenticated) {
  grpc::Status status = Exchange({Hello()}, nullptr, "");
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_NE(status.error_message().find("token"), std::string::npos);
  status = Exchange({Hello()}, nullptr, "s3creT");
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_NE(status.error_message().find("wrong token"), std::string::npos);
}

TEST_F(CollectorServiceTest, OversizedMessageIsRefused) {
  v1::StreamEventsRequest huge = Batch(1, 0, 1);
  v1::RegionName* region = huge.add_regions();
  region->set_id(1);
  region->set_name(std::string(100 << 10, 'x'));  // over the 64 KiB bound
  grpc::Status status = Exchange({Hello(), huge}, nullptr);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << status.error_message();
  // Too many events in one batch.
  status = Exchange({Hello(), Batch(1, 0, 101)}, nullptr);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(status.error_message().find("at most 100"), std::string::npos) << status.error_message();
}

TEST_F(CollectorServiceTest, IdentityCannotChangeMidStream) {
  v1::StreamEventsRequest impostor = Batch(1, 0, 1);
  *impostor.mutable_rank() = Identity();
  impostor.mutable_rank()->set_rank(3);
  grpc::Status status = Exchange({Hello(), impostor}, nullptr);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(status.error_message().find("changed mid-stream"), std::string::npos) << status.error_message();
}

TEST_F(CollectorServiceTest, MalformedEventsAreRefused) {
  v1::StreamEventsRequest bad_lane = Batch(1, 0, 1);
  bad_lane.mutable_events(0)->set_lane(4);  // the hello said 4 lanes
  EXPECT_EQ(Exchange({Hello(), bad_lane}, nullptr).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  v1::StreamEventsRequest bad_kind = Batch(1, 0, 1);
  bad_kind.mutable_events(0)->set_kind(static_cast<v1::EventKind>(99));
  EXPECT_EQ(Exchange({Hello(), bad_kind}, nullptr).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  v1::StreamEventsRequest backwards = Batch(1, 0, 1);
  grpc::Status status = Exchange({Hello(), Batch(2, 0, 1), backwards}, nullptr);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  v1::StreamEventsRequest no_pid = Hello();
  no_pid.mutable_rank()->set_pid(0);
  EXPECT_EQ(Exchange({no_pid}, nullptr).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  // The service is still healthy.
  EXPECT_TRUE(Exchange({Hello(), Batch(1, 0, 1)}, nullptr).ok());
}

TEST_F(CollectorServiceTest, WatchStreamsTheClusterState) {
  ASSERT_TRUE(Exchange({Hello(), Batch(1, 0, 3)}, nullptr).ok());
  grpc::ClientContext context;
  context.AddMetadata(kTokenMetadataKey, "s3cret");
  v1::WatchRequest request;
  auto reader = stub_->Watch(&context, request);
  v1::WatchResponse response;
  ASSERT_TRUE(reader->Read(&response));
  EXPECT_TRUE(response.full());
  EXPECT_EQ(response.state().job(), "job1");
  ASSERT_EQ(response.state().ranks_size(), 1);
  ASSERT_EQ(response.state().comms_size(), 1);
  EXPECT_EQ(response.state().comms(0).ranks(0).entered_seq(), 3u);
  ASSERT_TRUE(reader->Read(&response)) << "updates follow";
  context.TryCancel();
  while (reader->Read(&response)) {
  }
  reader->Finish();
}

// The online analyzer: two ranks disagree on a collective's size; the finding reaches
// Watch subscribers without anyone asking.
TEST_F(CollectorServiceTest, WatchCarriesTheOnlineAnalyzersFindings) {
  for (int rank = 0; rank < 2; ++rank) {
    v1::StreamEventsRequest hello = Hello();
    hello.mutable_rank()->set_pid(200 + rank);
    hello.mutable_rank()->set_rank(rank);
    v1::StreamEventsRequest batch;
    batch.set_batch_seq(1);
    v1::Event* event = batch.add_events();
    event->set_lane(1);
    event->set_kind(v1::EVENT_KIND_ENTER);
    event->set_fn(5);  // all-gather
    event->set_comm_id(77);
    event->set_rank(rank);
    event->set_nranks(2);
    event->set_seq(1);
    event->set_count(rank == 0 ? 10 : 20);
    event->set_dtype(7);
    ASSERT_TRUE(Exchange({hello, batch}, nullptr).ok());
  }
  grpc::ClientContext context;
  context.AddMetadata(kTokenMetadataKey, "s3cret");
  auto reader = stub_->Watch(&context, v1::WatchRequest());
  v1::WatchResponse response;
  bool found = false;
  std::string seen;  // the kinds that did travel, for the failure message
  // A deadline, not a count of messages: a loaded sanitizer run can be slow to tick the
  // analyzer while Watch keeps sending every 50 ms.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (!found && std::chrono::steady_clock::now() < deadline && reader->Read(&response)) {
    for (const v1::Finding& finding : response.state().findings()) {
      seen += v1::FindingKind_Name(finding.kind()) + " ";
      if (finding.kind() == v1::SIGNATURE_MISMATCH && finding.comm_id() == 77 && finding.seq() == 1) found = true;
      EXPECT_FALSE(finding.summary().empty());
      EXPECT_FALSE(finding.headline().empty());
    }
  }
  EXPECT_TRUE(found) << "no SIGNATURE_MISMATCH at comm 77 seq 1 on the Watch stream; findings seen: " << seen;
  context.TryCancel();
  while (reader->Read(&response)) {
  }
  reader->Finish();
}

TEST(CollectorSecurityTest, NonLoopbackNeedsAToken) {
  CollectorOptions options;
  options.listen = "0.0.0.0:0";
  options.log = false;
  auto server = CollectorServer::Start(options);
  ASSERT_FALSE(server.ok());
  EXPECT_EQ(server.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(server.status().message().find("--token-file"), std::string::npos);
  EXPECT_TRUE(IsLoopbackAddress("127.0.0.1:7777"));
  EXPECT_TRUE(IsLoopbackAddress("unix:/tmp/x.sock"));
  EXPECT_FALSE(IsLoopbackAddress("10.0.0.1:7777"));
  EXPECT_TRUE(ConstantTimeEquals("abc", "abc"));
  EXPECT_FALSE(ConstantTimeEquals("abc", "abd"));
  EXPECT_FALSE(ConstantTimeEquals("abc", "abcd"));
}

// A collector that cannot listen says so; it never crashes, and never shares its port.
TEST(CollectorListenTest, AnAddressItCannotTakeIsAClearError) {
  CollectorOptions options = QuietOptions(std::filesystem::temp_directory_path() /
                                          ("collwatch-listen-" + std::to_string(getpid())));
  options.listen = "127.0.0.1:0";
  auto first = CollectorServer::Start(options);
  ASSERT_TRUE(first.ok()) << first.status();

  // The port the first one holds: a second collector is refused (no SO_REUSEPORT).
  options.listen = (*first)->address();
  const std::string first_store = options.out_dir;
  options.out_dir += "-second";
  auto second = CollectorServer::Start(options);
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(second.status().message().find("cannot listen on " + options.listen), std::string::npos);

  const struct {
    std::string address;
    std::string words;
  } refused[] = {
      {"127.0.0.1:99999", "a port from 0 to 65535"},
      {"127.0.0.1:-1", "a port from 0 to 65535"},
      {"127.0.0.1:http", "a port from 0 to 65535"},
      {"127.0.0.1", "a port from 0 to 65535"},
      {"unix:/nonexistent-collwatch-folder/c.sock", "no folder /nonexistent-collwatch-folder"},
      {"192.0.2.1:0", "not an address of this machine"},  // TEST-NET-1: never local
  };
  options.token = "t";  // beyond loopback needs one
  for (const auto& [address, words] : refused) {
    options.listen = address;
    auto server = CollectorServer::Start(options);
    ASSERT_FALSE(server.ok()) << address;
    EXPECT_NE(server.status().message().find(words), std::string::npos) << address << ": " << server.status();
  }
  first->reset();
  std::filesystem::remove_all(first_store);
  std::filesystem::remove_all(options.out_dir);
}

// One writer per store: a second collector on the same folder is refused, naming the
// first; a folder another user could write is refused; once the first is gone the store
// is free again.
TEST(CollectorStoreTest, OneCollectorPerStoreFolder) {
  CollectorOptions options = QuietOptions(std::filesystem::temp_directory_path() /
                                          ("collwatch-one-store-" + std::to_string(getpid())));
  options.listen = "127.0.0.1:0";
  auto first = CollectorServer::Start(options);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(std::filesystem::status(options.out_dir).permissions() & std::filesystem::perms::others_write,
            std::filesystem::perms::none);
  auto second = CollectorServer::Start(options);
  ASSERT_FALSE(second.ok());
  EXPECT_NE(second.status().message().find("another collector (pid " + std::to_string(getpid()) + ") writes there"),
            std::string::npos)
      << second.status();
  first->reset();
  EXPECT_TRUE(CollectorServer::Start(options).ok()) << "the lock went with the first collector";

  std::filesystem::permissions(options.out_dir, std::filesystem::perms::all);  // 0777: anyone may plant files
  auto open_folder = CollectorServer::Start(options);
  ASSERT_FALSE(open_folder.ok());
  EXPECT_NE(open_folder.status().message().find("group or others may write in it (mode 0777)"), std::string::npos)
      << open_folder.status();
  std::filesystem::remove_all(options.out_dir);
}

std::string ReadTlsFile(const std::string& name) {
  std::ifstream file(std::string(COLLWATCH_TEST_DATA_DIR) + "/tls/" + name);
  return std::string(std::istreambuf_iterator<char>(file), std::istreambuf_iterator<char>());
}

// With a certificate, the collector speaks TLS only: a client that trusts the
// certificate streams; a plaintext client gets nowhere.
TEST(CollectorSecurityTest, TlsServesTlsClientsOnly) {
  const std::string out = std::filesystem::temp_directory_path() / ("collwatch-tls-" + std::to_string(getpid()));
  CollectorOptions options;
  options.listen = "127.0.0.1:0";
  options.out_dir = out;
  options.token = "t0ken";
  options.tls_cert_pem = ReadTlsFile("test-cert.pem");
  options.tls_key_pem = ReadTlsFile("test-key.pem");
  ASSERT_FALSE(options.tls_cert_pem.empty()) << "test certificate missing";
  options.log = false;
  auto server = CollectorServer::Start(options);
  ASSERT_TRUE(server.ok()) << server.status();

  auto exchange_hello = [&](const std::shared_ptr<grpc::ChannelCredentials>& credentials) {
    auto stub = v1::Collector::NewStub(grpc::CreateChannel((*server)->address(), credentials));
    grpc::ClientContext context;
    context.AddMetadata(kTokenMetadataKey, "t0ken");
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    auto stream = stub->StreamEvents(&context);
    v1::StreamEventsRequest hello;
    hello.mutable_rank()->set_job("job1");
    hello.mutable_rank()->set_host("node1");
    hello.mutable_rank()->set_pid(100);
    hello.mutable_rank()->set_lane_count(4);
    v1::StreamEventsResponse answer;
    const bool answered = stream->Write(hello) && stream->Read(&answer);
    stream->WritesDone();
    while (stream->Read(&answer)) {
    }
    const grpc::Status status = stream->Finish();
    return answered && status.ok();
  };
  grpc::SslCredentialsOptions trusted;
  trusted.pem_root_certs = options.tls_cert_pem;
  EXPECT_TRUE(exchange_hello(grpc::SslCredentials(trusted)));
  EXPECT_FALSE(exchange_hello(grpc::InsecureChannelCredentials()));
  grpc::SslCredentialsOptions untrusted;  // the system roots: our self-signed cert is not among them
  EXPECT_FALSE(exchange_hello(grpc::SslCredentials(untrusted)));
  (*server)->Shutdown();
  std::filesystem::remove_all(out);
}

}  // namespace
}  // namespace collwatch::collector_service_test
