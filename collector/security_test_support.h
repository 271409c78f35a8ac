// Test-only: what the collector's security tests share (collector_token_test.cc,
// collector_input_test.cc, agent_ring_folder_test.cc; docs/security.md): a scratch
// folder, a rank identity, hellos and batches, a client of one collector address, and
// collector options that keep quiet. Threading: single-threaded test code.
#ifndef COLLWATCH_COLLECTOR_SECURITY_TEST_SUPPORT_H_
#define COLLWATCH_COLLECTOR_SECURITY_TEST_SUPPORT_H_

#include <stdlib.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "collector/collector_service.h"
#include "grpcpp/grpcpp.h"
#include "proto/collector_channel.h"
#include "proto/collwatch.grpc.pb.h"

namespace collwatch {

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

inline v1::RankIdentity Identity(const std::string& job, const std::string& host = "node1", int pid = 100) {
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

inline v1::StreamEventsRequest Hello(const v1::RankIdentity& identity) {
  v1::StreamEventsRequest hello;
  *hello.mutable_rank() = identity;
  return hello;
}

// A batch of `indices` on `lane` (in the order given).
inline v1::StreamEventsRequest Batch(uint64_t batch_seq, const std::vector<uint64_t>& indices, uint32_t lane = 1) {
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

inline CollectorOptions QuietOptions(const std::string& out_dir) {
  CollectorOptions options;
  options.out_dir = out_dir;
  options.log = false;
  options.analyze = false;
  options.watch_interval_s = 0.05;
  return options;
}

}  // namespace collwatch

#endif  // COLLWATCH_COLLECTOR_SECURITY_TEST_SUPPORT_H_
