// Feeding the analyzer from event streams.
// Threading: see online_analyzer.h (one mutex for the queue, one for the model).
#include "collector/online_analyzer.h"

#include <algorithm>
#include <set>
#include <variant>

#include "analyzer/finding_text.h"
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

void OnlineAnalyzer::NoteNoRing(NoRingNoteRead note) {
  Item item;
  item.no_ring = std::move(note);
  std::lock_guard<std::mutex> lock(queue_mutex_);
  queue_.push_back(std::move(item));
}

void OnlineAnalyzer::EnqueueStacks(const std::string& key, stacks::ProcessStacks stacks, int64_t taken_ns) {
  Item item;
  item.key = key;
  QueueStacks(std::move(item), std::move(stacks), taken_ns);
}

void OnlineAnalyzer::AddStacksOf(const ProcessInfo& info, stacks::ProcessStacks stacks, int64_t taken_ns) {
  Item item;
  item.observed = info;
  QueueStacks(std::move(item), std::move(stacks), taken_ns);
}

void OnlineAnalyzer::QueueStacks(Item item, stacks::ProcessStacks stacks, int64_t taken_ns) {
  item.stacks = std::move(stacks);
  item.stacks_taken_ns = taken_ns;
  std::lock_guard<std::mutex> lock(queue_mutex_);
  queue_.push_back(std::move(item));
}

std::vector<ProcessInfo> OnlineAnalyzer::UnstreamedProcessesNamedBy(const analyzer::Finding& finding) {
  std::lock_guard<std::mutex> lock(model_mutex_);
  std::vector<ProcessInfo> unstreamed;
  for (const auto& [process, ranks] : analyzer_.ProcessesNamedBy(finding)) {
    const analyzer::Process& of = analyzer_.model().process(process);
    if (of.observed_only) unstreamed.push_back(of.info);
  }
  return unstreamed;
}

void OnlineAnalyzer::FeedLocked(Item& item) {
  analyzer::JobModel& model = analyzer_.model();
  if (item.observed && item.stacks) {
    if (const std::optional<analyzer::ProcessId> process = model.FindProcess(item.observed->host, item.observed->pid)) {
      model.AddStacks(*process, *std::move(item.stacks), item.stacks_taken_ns);
    }
    return;
  }
  if (item.observed) {
    model.ObserveProcess(*item.observed, item.update.sample);
    return;
  }
  if (item.no_ring) {
    model.NoteNoRing(*item.no_ring);
    return;
  }
  Stream* stream = nullptr;
  {
    std::lock_guard<std::mutex> lock(queue_mutex_);
    stream = &streams_[item.key];  // std::map: the address stays valid
  }
  if (!stream->in_model) {
    if (item.stacks) return;  // stacks of a stream whose batches never reached the model
    stream->process = model.AddProcess(ProcessInfoFromIdentity(stream->identity));
    stream->in_model = true;
  }
  if (item.stacks) {
    model.AddStacks(stream->process, *std::move(item.stacks), item.stacks_taken_ns);
    return;
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
  for (Item& item : items) FeedLocked(item);
  std::vector<analyzer::Finding> found = analyzer_.Analyze(now_ns, final_pass);
  for (const size_t index : analyzer_.AttachStacks()) updated_.insert(index);
  // Stragglers: stalls reworded in place once their late ranks arrived.
  for (const size_t index : analyzer_.TakeResolved()) updated_.insert(index);
  return found;
}

std::vector<std::pair<size_t, analyzer::Finding>> OnlineAnalyzer::TakeUpdatedFindings() {
  std::lock_guard<std::mutex> lock(model_mutex_);
  std::vector<std::pair<size_t, analyzer::Finding>> updated;
  for (const size_t index : updated_) {
    updated.emplace_back(index, WithRefusedStreamsLocked(analyzer_.findings()[index]));
  }
  updated_.clear();
  return updated;
}

std::vector<std::string> OnlineAnalyzer::StreamsNamedBy(const analyzer::Finding& finding) {
  std::lock_guard<std::mutex> model_lock(model_mutex_);
  std::vector<std::string> keys;
  const auto named = analyzer_.ProcessesNamedBy(finding);
  std::lock_guard<std::mutex> queue_lock(queue_mutex_);
  for (const auto& [key, stream] : streams_) {
    if (!stream.in_model) continue;
    for (const auto& [process, ranks] : named) {
      if (process == stream.process) keys.push_back(key);
    }
  }
  return keys;
}

bool OnlineAnalyzer::LateRanksAtWork(const analyzer::Finding& finding, int64_t now_ns) {
  std::lock_guard<std::mutex> lock(model_mutex_);
  return analyzer_.LateRanksAtWork(finding, now_ns);
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
  std::vector<analyzer::Finding> findings = analyzer_.findings();
  for (analyzer::Finding& finding : findings) finding = WithRefusedStreamsLocked(std::move(finding));
  return findings;
}

void OnlineAnalyzer::NoteRefusedStream(const analyzer::RefusedStream& stream) {
  std::lock_guard<std::mutex> lock(model_mutex_);
  if (refused_.size() >= kMaxRefusedStreams ||
      std::find(refused_.begin(), refused_.end(), stream) != refused_.end()) {
    return;
  }
  refused_.push_back(stream);
}

analyzer::Finding OnlineAnalyzer::WithRefusedStreamsLocked(analyzer::Finding finding) const {
  if (refused_.empty()) return finding;
  // A refused rank left no record here: it can only be one a stall waits for. Its job
  // rank is matched against the ranks the finding names (equal on the world
  // communicator); a stream with no rank may be any of them.
  const auto* stall = std::get_if<analyzer::StallFacts>(&finding.evidence);
  if (stall == nullptr) return finding;
  std::set<int32_t> named(finding.lagging_ranks.begin(), finding.lagging_ranks.end());
  for (const analyzer::StalledRank& rank : stall->ranks) named.insert(rank.place.global.begin(), rank.place.global.end());
  finding.refused_streams.clear();
  for (const analyzer::RefusedStream& stream : refused_) {
    if (stream.rank < 0 || named.count(stream.rank) != 0) finding.refused_streams.push_back(stream);
  }
  if (!finding.refused_streams.empty()) analyzer::WriteWords(&finding);
  return finding;
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
  info.refused_streams = refused_;
  if (dropped > 0) {
    info.data_gaps.push_back(std::to_string(dropped) + " records arrived faster than the online analysis could take "
                         "them and were not analysed (they are in the trace store: run collwatch analyze)");
  }
  return info;
}

}  // namespace collwatch
