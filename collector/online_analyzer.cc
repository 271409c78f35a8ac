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

void FindingToProto(const analyzer::Finding& finding, v1::Finding* out) {
  out->set_kind(static_cast<v1::FindingKind>(static_cast<int>(finding.kind)));
  out->set_comm_id(finding.comm_id);
  out->set_seq(finding.seq);
  for (const analyzer::RankClass& rank_class : finding.rank_classes) {
    v1::RankClass* item = out->add_rank_classes();
    for (int32_t rank : rank_class.ranks) item->add_ranks(rank);
    item->set_label(rank_class.label);
  }
  for (int32_t rank : finding.lagging_ranks) out->add_lagging_ranks(rank);
  for (const std::string& region : finding.regions) out->add_regions(region);
  out->set_detect_latency_s(finding.detect_latency_s);
  out->set_summary(finding.summary);
  out->set_first_bad_t_ns(static_cast<uint64_t>(std::max<int64_t>(finding.first_bad_ns, 0)));
  out->set_headline(finding.headline);
  out->set_brief(finding.brief);
  out->set_undecided(!finding.decided);
  for (analyzer::FindingKind kind : finding.other_readings) {
    out->add_other_readings(static_cast<v1::FindingKind>(static_cast<int>(kind)));
  }
  for (const analyzer::ClassContext& context : finding.context) {
    v1::FindingContext* item = out->add_context();
    for (int32_t rank : context.ranks) item->add_ranks(rank);
    for (const std::string& line : context.lines) item->add_lines(line);
  }
  for (const analyzer::ProcessReport& process : finding.processes) {
    v1::ProcessReport* item = out->add_processes();
    item->set_rank(process.rank);
    item->set_global_rank(process.global_rank);
    item->set_pid(process.pid);
    item->set_host(WireText(process.host));
    item->set_state(WireText(process.state));
    item->set_cpu_advancing(process.cpu_advancing);
    item->set_heartbeat_age_s(process.heartbeat_age_s);
    item->set_heartbeat_fresh(process.heartbeat_fresh);
    item->set_ended(process.ended);
  }
}

}  // namespace collwatch

namespace collwatch {

analyzer::Finding FindingFromProto(const v1::Finding& finding) {
  analyzer::Finding out;
  out.kind = static_cast<analyzer::FindingKind>(static_cast<int>(finding.kind()));
  out.comm_id = finding.comm_id();
  out.seq = finding.seq();
  for (const v1::RankClass& rank_class : finding.rank_classes()) {
    out.rank_classes.push_back({{rank_class.ranks().begin(), rank_class.ranks().end()}, rank_class.label()});
  }
  out.lagging_ranks.assign(finding.lagging_ranks().begin(), finding.lagging_ranks().end());
  out.regions.assign(finding.regions().begin(), finding.regions().end());
  out.detect_latency_s = finding.detect_latency_s();
  out.summary = finding.summary();
  out.first_bad_ns = static_cast<int64_t>(finding.first_bad_t_ns());
  out.found_ns = out.first_bad_ns + static_cast<int64_t>(finding.detect_latency_s() * 1e9);
  out.headline = finding.headline();
  out.brief = finding.brief();
  out.decided = !finding.undecided();
  for (int kind : finding.other_readings()) out.other_readings.push_back(static_cast<analyzer::FindingKind>(kind));
  for (const v1::FindingContext& context : finding.context()) {
    out.context.push_back({{context.ranks().begin(), context.ranks().end()}, {context.lines().begin(), context.lines().end()}});
  }
  for (const v1::ProcessReport& process : finding.processes()) {
    analyzer::ProcessReport& item = out.processes.emplace_back();
    item.rank = process.rank();
    item.global_rank = process.global_rank();
    item.pid = process.pid();
    item.host = process.host();
    item.state = process.state();
    item.cpu_advancing = process.cpu_advancing();
    item.heartbeat_age_s = process.heartbeat_age_s();
    item.heartbeat_fresh = process.heartbeat_fresh();
    item.ended = process.ended();
  }
  return out;
}

}  // namespace collwatch
