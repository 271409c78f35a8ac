// Feeding the analyzer from event streams.
// Threading: see online_analyzer.h (one mutex for the queue, one for the model).
#include "collector/online_analyzer.h"

#include <algorithm>

#include "store/event_codec.h"

namespace collwatch {

void OnlineAnalyzer::Enqueue(const std::string& key, const v1::RankIdentity& identity, ProcessUpdate update) {
  Item item;
  item.key = key;
  item.update = std::move(update);
  std::lock_guard<std::mutex> lock(queue_mutex_);
  Stream& stream = streams_[key];
  if (stream.identity.pid() == 0 && stream.identity.host().empty()) stream.identity = identity;
  if (queued_records_ + item.update.records.size() > kMaxQueuedRecords) {
    dropped_ += item.update.records.size();  // the analysis is behind: say so, never stall ingest
    item.update.records.clear();
  }
  queued_records_ += item.update.records.size();
  queue_.push_back(std::move(item));
}

void OnlineAnalyzer::ObserveProcess(const ProcessInfo& info, const ProcessSample& sample) {
  Item item;
  item.observed = info;
  item.update.sample = sample;
  std::lock_guard<std::mutex> lock(queue_mutex_);
  queue_.push_back(std::move(item));
}

void OnlineAnalyzer::FeedLocked(const Item& item) {
  analyzer::JobModel& model = analyzer_.model();
  if (item.observed) {
    model.ObserveProcess(*item.observed, item.update.sample);
    return;
  }
  Stream* stream = nullptr;
  {
    std::lock_guard<std::mutex> lock(queue_mutex_);
    stream = &streams_[item.key];  // std::map: the address stays valid
  }
  if (!stream->in_model) {
    stream->process = model.AddProcess(ProcessInfoFromIdentity(stream->identity));
    stream->in_model = true;
  }
  model.Apply(stream->process, item.update);
}

std::vector<analyzer::Finding> OnlineAnalyzer::Tick(int64_t now_ns, bool final_pass) {
  std::vector<Item> items;
  {
    std::lock_guard<std::mutex> lock(queue_mutex_);
    items.swap(queue_);
    queued_records_ = 0;
  }
  std::lock_guard<std::mutex> lock(model_mutex_);
  if (frozen_) return {};
  for (const Item& item : items) FeedLocked(item);
  return analyzer_.Analyze(now_ns, final_pass);
}

void OnlineAnalyzer::Freeze() {
  std::lock_guard<std::mutex> lock(model_mutex_);
  frozen_ = true;
}

std::vector<analyzer::InflightCollective> OnlineAnalyzer::Inflight() {
  std::lock_guard<std::mutex> lock(model_mutex_);
  return analyzer_.Inflight();
}

std::vector<analyzer::Finding> OnlineAnalyzer::Findings() {
  std::lock_guard<std::mutex> lock(model_mutex_);
  return analyzer_.findings();
}

uint64_t OnlineAnalyzer::dropped_records() {
  std::lock_guard<std::mutex> lock(queue_mutex_);
  return dropped_;
}

analyzer::ReportInfo OnlineAnalyzer::Info(const std::string& job) {
  const uint64_t dropped = dropped_records();
  std::lock_guard<std::mutex> lock(model_mutex_);
  analyzer::ReportInfo info = analyzer::DescribeJob(analyzer_.model());
  info.job = job;
  info.online = true;
  if (dropped > 0) {
    info.notes.push_back(std::to_string(dropped) + " records arrived faster than the online analysis could take "
                         "them and were not analysed (they are in the trace store: run collwatch analyze)");
  }
  return info;
}

}  // namespace collwatch
