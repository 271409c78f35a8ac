// A finding to and from its wire form. Threading: see finding_codec.h.
#include "collector/finding_codec.h"

#include <algorithm>

#include "store/event_codec.h"

namespace collwatch {

namespace {

void BranchPointToProto(const analyzer::BranchPoint& point, v1::BranchPoint* out) {
  out->set_function(WireText(point.function));
  out->set_file(WireText(point.file));
  for (const analyzer::BranchArm& arm : point.arms) {
    v1::BranchArm* item = out->add_arms();
    for (int32_t rank : arm.ranks) item->add_ranks(rank);
    item->set_line(arm.line);
    item->set_callee(WireText(arm.callee));
    item->set_source(WireText(arm.source));
  }
}

analyzer::BranchPoint BranchPointFromProto(const v1::BranchPoint& point) {
  analyzer::BranchPoint out;
  out.function = point.function();
  out.file = point.file();
  for (const v1::BranchArm& arm : point.arms()) {
    out.arms.push_back({{arm.ranks().begin(), arm.ranks().end()}, arm.line(), arm.callee(), arm.source()});
  }
  return out;
}

}  // namespace

void RefusedStreamToProto(const analyzer::RefusedStream& stream, v1::RefusedStream* out) {
  out->set_job(stream.job);
  out->set_host(stream.host);
  out->set_pid(stream.pid);
  out->set_rank(stream.rank);
}

analyzer::RefusedStream RefusedStreamFromProto(const v1::RefusedStream& stream) {
  return {.job = stream.job(), .host = stream.host(), .pid = stream.pid(), .rank = stream.rank()};
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
  for (const analyzer::ClassCallPath& path : finding.call_paths) {
    v1::ClassCallPath* item = out->add_call_paths();
    for (int32_t rank : path.ranks) item->add_ranks(rank);
    *item->mutable_path() = CallPathToWire(0, path.path);
    item->set_inferred(path.inferred);
  }
  if (finding.branch_point) BranchPointToProto(*finding.branch_point, out->mutable_branch_point());
  for (const analyzer::RefusedStream& stream : finding.refused_streams) {
    RefusedStreamToProto(stream, out->add_refused_streams());
  }
  if (finding.first_parted) BranchPointToProto(*finding.first_parted, out->mutable_first_parted());
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
  if (finding.stacks) FindingStacksToProto(*finding.stacks, out->mutable_stacks());
  if (finding.resolution) {
    out->set_resolved(true);
    out->set_resolved_after_s(finding.resolution->resolved_after_s);
    out->set_lag_s(finding.resolution->lag_s);
  }
}

void FindingStacksToProto(const analyzer::FindingStacks& stacks, v1::FindingStacks* out) {
  out->set_taken_ns(stacks.taken_ns);
  out->set_complete(stacks.complete);
  for (const analyzer::StackClass& merged : stacks.classes) {
    v1::StackClass* item = out->add_classes();
    for (int32_t rank : merged.ranks) item->add_ranks(rank);
    for (int32_t pid : merged.pids) item->add_pids(pid);
    item->set_thread(WireText(merged.thread));
    item->set_where(WireText(merged.where));
  }
}

analyzer::FindingStacks FindingStacksFromProto(const v1::FindingStacks& stacks) {
  analyzer::FindingStacks out;
  out.taken_ns = stacks.taken_ns();
  out.complete = stacks.complete();
  for (const v1::StackClass& merged : stacks.classes()) {
    out.classes.push_back({{merged.ranks().begin(), merged.ranks().end()},
                           {merged.pids().begin(), merged.pids().end()},
                           merged.thread(),
                           merged.where()});
  }
  return out;
}

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
  for (const v1::ClassCallPath& path : finding.call_paths()) {
    out.call_paths.push_back({{path.ranks().begin(), path.ranks().end()}, CallPathFromWire(path.path()), path.inferred()});
  }
  if (finding.has_branch_point()) out.branch_point = BranchPointFromProto(finding.branch_point());
  for (const v1::RefusedStream& stream : finding.refused_streams()) {
    out.refused_streams.push_back(RefusedStreamFromProto(stream));
  }
  if (finding.has_first_parted()) out.first_parted = BranchPointFromProto(finding.first_parted());
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
  if (finding.has_stacks()) out.stacks = FindingStacksFromProto(finding.stacks());
  if (finding.resolved()) {
    const int64_t resolved_ns = out.found_ns + static_cast<int64_t>(finding.resolved_after_s() * 1e9);
    out.resolution = analyzer::StallResolution{resolved_ns, finding.resolved_after_s(), finding.lag_s()};
  }
  return out;
}

}  // namespace collwatch
