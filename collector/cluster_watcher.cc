// Reading the Watch stream. Threading: see cluster_watcher.h.
#include "collector/cluster_watcher.h"

#include <chrono>

#include "collector/collector_service.h"
#include "collector/online_analyzer.h"
#include "collector/watch_delta.h"
#include "proto/collwatch.grpc.pb.h"
#include "collector/finding_codec.h"

namespace collwatch {

ClusterWatcher::ClusterWatcher(ClusterWatcherOptions options) : options_(std::move(options)) {
  thread_ = std::thread([this] { Loop(); });
}

ClusterWatcher::~ClusterWatcher() {
  stop_ = true;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (context_ != nullptr) context_->TryCancel();
  }
  thread_.join();
}

ClusterView ClusterWatcher::View() {
  std::lock_guard<std::mutex> lock(mutex_);
  return view_;
}

std::vector<analyzer::Finding> ClusterWatcher::Findings() {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<analyzer::Finding> findings;
  for (const v1::Finding& finding : view_.state.findings()) findings.push_back(FindingFromProto(finding));
  return findings;
}

bool ClusterWatcher::connected() {
  std::lock_guard<std::mutex> lock(mutex_);
  return view_.connected;
}

std::string ClusterWatcher::RequestStacks() {
  grpc::ChannelArguments arguments;
  auto stub = v1::Collector::NewStub(CollectorChannel(options_.address, options_.tls_ca_pem, arguments));
  grpc::ClientContext context;
  if (!options_.token.empty()) context.AddMetadata(kTokenMetadataKey, options_.token);
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  v1::TakeStacksRequest request;
  request.set_job(options_.job);
  v1::TakeStacksResponse response;
  const grpc::Status status = stub->TakeStacks(&context, request, &response);
  if (!status.ok()) return "stacks not asked for: " + status.error_message();
  return "asked " + std::to_string(response.processes()) + " processes for their stacks";
}

void ClusterWatcher::Loop() {
  BlockAllSignalsInThisThread();
  grpc::ChannelArguments arguments;
  arguments.SetMaxReceiveMessageSize(256 << 20);
  auto stub = v1::Collector::NewStub(CollectorChannel(options_.address, options_.tls_ca_pem, arguments));
  while (!stop_) {
    grpc::ClientContext context;
    if (!options_.token.empty()) context.AddMetadata(kTokenMetadataKey, options_.token);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (stop_) break;
      context_ = &context;
    }
    v1::WatchRequest request;
    request.set_job(options_.job);
    auto reader = stub->Watch(&context, request);
    v1::WatchResponse response;
    bool had_full = false;
    while (reader->Read(&response)) {
      std::lock_guard<std::mutex> lock(mutex_);
      // A delta only makes sense on top of this stream's own full state.
      if (!response.full() && !had_full) continue;
      if (response.full()) {
        had_full = true;
        ++view_.connections;
        view_.failed_attempts = 0;
        view_.last_error.clear();
        view_.last_code = grpc::StatusCode::OK;
      }
      ApplyWatchResponse(response, &view_.state);
      view_.connected = true;
      view_.ever_connected = true;
      view_.collector_time_ns = response.collector_time_ns();
      ++view_.messages;
      view_.bytes += response.ByteSizeLong();
    }
    const grpc::Status status = reader->Finish();
    {
      std::lock_guard<std::mutex> lock(mutex_);
      context_ = nullptr;
      view_.connected = false;
      ++view_.failed_attempts;
      view_.last_error = status.ok() ? "the collector ended the stream" : status.error_message();
      view_.last_code = status.error_code();
    }
    const auto retry = std::chrono::duration<double>(options_.retry_s);
    const auto until = std::chrono::steady_clock::now() + retry;
    while (!stop_ && std::chrono::steady_clock::now() < until) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

}  // namespace collwatch
