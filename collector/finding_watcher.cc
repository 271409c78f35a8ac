// Reading findings off the Watch stream.
#include "collector/finding_watcher.h"

#include <pthread.h>
#include <signal.h>

#include <chrono>

#include "collector/collector_service.h"
#include "collector/online_analyzer.h"
#include "proto/collwatch.grpc.pb.h"

namespace collwatch {

FindingWatcher::FindingWatcher(std::string address, std::string token, std::string job)
    : address_(std::move(address)), token_(std::move(token)), job_(std::move(job)) {
  thread_ = std::thread([this] { Loop(); });
}

FindingWatcher::~FindingWatcher() {
  stop_ = true;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (context_ != nullptr) context_->TryCancel();
  }
  thread_.join();
}

std::vector<analyzer::Finding> FindingWatcher::Findings() {
  std::lock_guard<std::mutex> lock(mutex_);
  return findings_;
}

void FindingWatcher::Loop() {
  sigset_t all;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, nullptr);
  auto channel = grpc::CreateChannel(address_, grpc::InsecureChannelCredentials());
  auto stub = v1::Collector::NewStub(channel);
  while (!stop_) {
    grpc::ClientContext context;
    if (!token_.empty()) context.AddMetadata(kTokenMetadataKey, token_);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (stop_) break;
      context_ = &context;
    }
    v1::WatchRequest request;
    request.set_job(job_);
    auto reader = stub->Watch(&context, request);
    v1::WatchResponse response;
    while (reader->Read(&response)) {
      connected_ = true;
      // Every message carries the findings so far (the state is sent whole).
      std::vector<analyzer::Finding> findings;
      for (const v1::Finding& finding : response.state().findings()) findings.push_back(FindingFromProto(finding));
      std::lock_guard<std::mutex> lock(mutex_);
      if (findings.size() >= findings_.size()) findings_ = std::move(findings);
    }
    reader->Finish();
    connected_ = false;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      context_ = nullptr;
    }
    for (int i = 0; i < 10 && !stop_; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

}  // namespace collwatch
