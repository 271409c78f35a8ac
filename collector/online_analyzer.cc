// Feeding the analyzer from event streams.
#include "collector/online_analyzer.h"

#include "collector/event_codec.h"

namespace collwatch {
namespace {

analyzer::ProcessStatus StatusFromWire(v1::WriterStatus status) {
  switch (status) {
    case v1::WRITER_STATUS_EXITED: return analyzer::ProcessStatus::kExited;
    case v1::WRITER_STATUS_DISABLED: return analyzer::ProcessStatus::kDisabled;
    case v1::WRITER_STATUS_DEAD: return analyzer::ProcessStatus::kDead;
    case v1::WRITER_STATUS_SILENT: return analyzer::ProcessStatus::kSilent;
    default: return analyzer::ProcessStatus::kRunning;
  }
}

}  // namespace

void OnlineAnalyzer::StreamOpened(const std::string& key, const v1::RankIdentity& identity) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (streams_.count(key) != 0) return;  // a reconnect of a known process
  analyzer::ProcessInfo info;
  info.host = identity.host();
  info.pid = identity.pid();
  info.global_rank = identity.rank();
  info.world_size = identity.world_size();
  info.realtime_offset_ns =
      static_cast<int64_t>(identity.start_realtime_ns()) - static_cast<int64_t>(identity.start_monotonic_ns());
  Stream& stream = streams_[key];
  stream.process = analyzer_.model().AddProcess(info);
  stream.realtime_offset_ns = info.realtime_offset_ns;
}

void OnlineAnalyzer::Feed(const std::string& key, const v1::StreamEventsRequest& batch) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (frozen_) return;
  auto found = streams_.find(key);
  if (found == streams_.end()) return;
  Stream& stream = found->second;
  analyzer::JobModel& model = analyzer_.model();
  for (const v1::RegionName& region : batch.regions()) model.AddRegionName(stream.process, region.id(), region.name());
  for (const v1::Event& event : batch.events()) {
    const uint64_t position = LanePosition(event);
    uint64_t& next = stream.next_position[event.lane()];
    if (position < next) continue;  // a resend of what was fed already
    next = position + 1;
    model.AddRecord(stream.process, event.lane(), event.index(), RecordFromEvent(event));
  }
  if (batch.writer_status() != v1::WRITER_STATUS_UNSPECIFIED) {
    const int64_t heartbeat =
        batch.heartbeat_ns() == 0 ? 0 : static_cast<int64_t>(batch.heartbeat_ns()) + stream.realtime_offset_ns;
    model.SetStatus(stream.process, StatusFromWire(batch.writer_status()), heartbeat,
                    batch.lost() + batch.torn() + batch.dropped());
  }
}

std::vector<analyzer::Finding> OnlineAnalyzer::Tick(int64_t now_ns, bool final_pass) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (frozen_) return {};
  return analyzer_.Analyze(now_ns, final_pass);
}

void OnlineAnalyzer::Freeze() {
  std::lock_guard<std::mutex> lock(mutex_);
  frozen_ = true;
}

std::vector<analyzer::Finding> OnlineAnalyzer::Findings() {
  std::lock_guard<std::mutex> lock(mutex_);
  return analyzer_.findings();
}

analyzer::ReportInfo OnlineAnalyzer::Info(const std::string& job) {
  std::lock_guard<std::mutex> lock(mutex_);
  analyzer::ReportInfo info = analyzer::DescribeJob(analyzer_.model());
  info.job = job;
  info.online = true;
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
  for (const analyzer::ClassContext& context : finding.context) {
    v1::FindingContext* item = out->add_context();
    for (int32_t rank : context.ranks) item->add_ranks(rank);
    for (const std::string& line : context.lines) item->add_lines(line);
  }
}

}  // namespace collwatch
