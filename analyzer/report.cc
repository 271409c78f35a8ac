// report.json and report.txt: the one place a finding is rendered.
#include "analyzer/report.h"

#include <algorithm>
#include <cstdio>
#include <ctime>
#include <map>
#include <tuple>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "analyzer/finding_words.h"
#include "analyzer/process_ranks.h"
#include "files/json_contract.h"
#include "files/safe_files.h"
#include "files/safe_text.h"
#include "files/version.h"

namespace collwatch::analyzer {

std::string WallClock(int64_t realtime_ns) {
  if (realtime_ns <= 0) return "";
  const time_t seconds = static_cast<time_t>(realtime_ns / 1'000'000'000);
  tm utc{};
  gmtime_r(&seconds, &utc);
  char text[40];
  strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%S", &utc);
  return absl::StrFormat("%s.%03dZ", text, (realtime_ns / 1'000'000) % 1000);
}

std::optional<int64_t> ParseWallClock(std::string_view text) {
  tm utc{};
  int millis = 0, used = 0;
  const std::string copy(text);  // sscanf wants a terminated string
  if (std::sscanf(copy.c_str(), "%4d-%2d-%2dT%2d:%2d:%2d.%3dZ%n", &utc.tm_year, &utc.tm_mon, &utc.tm_mday,
                  &utc.tm_hour, &utc.tm_min, &utc.tm_sec, &millis, &used) != 7 ||
      used != static_cast<int>(copy.size())) {
    return std::nullopt;
  }
  utc.tm_year -= 1900;
  utc.tm_mon -= 1;
  const time_t seconds = timegm(&utc);
  if (seconds <= 0) return std::nullopt;
  return static_cast<int64_t>(seconds) * 1'000'000'000 + int64_t{millis} * 1'000'000;
}

namespace {

// Prose folded to `width` columns with an indent.
std::string Fold(const std::string& text, size_t width, const std::string& indent) {
  std::string out = indent;
  size_t column = indent.size();
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find(' ', start);
    if (end == std::string::npos) end = text.size();
    const size_t word = end - start;
    if (column > indent.size() && column + 1 + word > width) {
      absl::StrAppend(&out, "\n", indent);
      column = indent.size();
    } else if (column > indent.size()) {
      out += ' ';
      ++column;
    }
    out.append(text, start, word);
    column += word;
    start = end + 1;
  }
  return out;
}

// "0-3", or "pid 4242 on node0" for processes without a RANK.
std::string RanksOrPids(const std::vector<const RankEnding*>& group) {
  std::vector<int32_t> ranks;
  std::string pids;
  for (const RankEnding* rank : group) {
    if (rank->global_rank >= 0) {
      ranks.push_back(rank->global_rank);
    } else {
      absl::StrAppend(&pids, pids.empty() ? "" : ", ", "pid ", rank->pid, " on ", rank->host);
    }
  }
  std::string text;
  if (!ranks.empty()) text = absl::StrCat(ranks.size() == 1 ? "rank " : "ranks ", RankListText(ranks));
  if (ranks.size() == 1 && group.size() == 1) absl::StrAppend(&text, " (pid ", group[0]->pid, ")");
  if (!pids.empty()) absl::StrAppend(&text, text.empty() ? "" : ", ", pids);
  return text;
}

// One line per way of ending: ranks that ended alike (and were last in the same call)
// share it, so that thousands of ranks read as a few lines.
std::string RankEndingLines(const ReportInfo& info, const std::vector<Finding>& findings) {
  const std::vector<RankEnding>& ranks = info.ranks;
  std::vector<std::pair<std::string, std::vector<const RankEnding*>>> groups;
  std::map<std::string, size_t> group_of;
  for (const RankEnding& rank : ranks) {
    std::string words = rank.ended_text.empty() ? "still running" : rank.ended_text;
    absl::StrAppend(&words, "; last NCCL call: ", rank.last_call.value_or("none recorded"));
    auto [it, inserted] = group_of.try_emplace(words, groups.size());
    if (inserted) groups.push_back({words, {}});
    groups[it->second].second.push_back(&rank);
  }
  std::string text;
  for (const auto& [words, group] : groups) absl::StrAppendFormat(&text, "  %-16s %s\n", RanksOrPids(group), words);
  // Every rank dead: which was first is where to look.
  if (const std::string first = WhoEndedFirstText(info, findings); !first.empty()) {
    absl::StrAppend(&text, "  (", first, ")\n");
  }
  return text;
}

// "the collector refused the streams of 1 process that came as job 'run-2' (rank 1 on
// host b, pid 7): it serves job 'run-1'; ..."
std::string RefusedStreamsGapText(const ReportInfo& info) {
  std::vector<std::string> streams;
  for (const RefusedStream& stream : info.refused_streams) {
    streams.push_back(absl::StrCat(stream.rank >= 0 ? absl::StrCat("rank ", stream.rank, " on host ") : "host ",
                                   stream.host, ", pid ", stream.pid, ", job '", stream.job, "'"));
  }
  return absl::StrCat("the collector refused the streams of ", info.refused_streams.size(),
                      info.refused_streams.size() == 1 ? " process" : " processes", " that came as another job (",
                      absl::StrJoin(streams, "; "), "): it serves job '", info.job,
                      "'; give every node the same job id (COLLWATCH_JOB_ID, or the launcher's: docs/multi-node.md)");
}

// Nothing was recorded: no verdict can rest on that.
bool NothingRecorded(const ReportInfo& info) { return info.calls_counted && info.calls == 0; }
constexpr const char* kNothingRecordedText =
    "no NCCL call was recorded, so nothing was checked: if the job uses NCCL, the preload did not reach it "
    "(a container, sudo or env -i that drops LD_PRELOAD, NCCL linked statically: try --profiler-plugin; "
    "docs/quickstart.md)";

// The ranks the preload made no ring for (RankEnding::not_recorded).
std::vector<const RankEnding*> NotRecordedRanks(const ReportInfo& info) {
  std::vector<const RankEnding*> ranks;
  for (const RankEnding& rank : info.ranks) {
    if (!rank.not_recorded.empty()) ranks.push_back(&rank);
  }
  return ranks;
}

// "ranks 1-3 were not recorded (no ring: /dev/shm/... has 0.5 MiB free, ...)": each
// reason once. "" when every rank had a ring.
std::string NotRecordedText(const ReportInfo& info) {
  const std::vector<const RankEnding*> ranks = NotRecordedRanks(info);
  if (ranks.empty()) return "";
  std::vector<std::string> whys;
  for (const RankEnding* rank : ranks) {
    if (std::find(whys.begin(), whys.end(), rank->not_recorded) == whys.end()) whys.push_back(rank->not_recorded);
  }
  return absl::StrCat(RanksOrPids(ranks), ranks.size() == 1 ? " was" : " were", " not recorded (",
                      absl::StrJoin(whys, "; "), ")");
}

// "rank 3 of world size 4 left no trace": those without a reason (NotRecordedText's are
// said there), "" when none.
std::string MissingRanksText(const ReportInfo& info) {
  std::vector<int32_t> unexplained;
  const std::vector<const RankEnding*> not_recorded = NotRecordedRanks(info);
  for (const int32_t missing : info.missing_ranks) {
    if (std::none_of(not_recorded.begin(), not_recorded.end(),
                     [missing](const RankEnding* rank) { return rank->global_rank == missing; })) {
      unexplained.push_back(missing);
    }
  }
  if (unexplained.empty()) return "";
  return absl::StrCat(unexplained.size() == 1 ? "rank " : "ranks ", RankListText(unexplained), " of world size ",
                      info.world_size, " left no trace");
}

}  // namespace

std::string WhyNotHealthy(const std::vector<Finding>& findings, const ReportInfo& info) {
  std::vector<std::string> reasons;
  const size_t hangs = UnresolvedCount(findings);
  if (hangs > 0) reasons.push_back(absl::StrCat(hangs, hangs == 1 ? " finding" : " findings"));
  int killed = 0, exited_nonzero = 0, gone = 0;
  for (const RankEnding& rank : info.ranks) {
    // Gone or not, a rank without a ring is a gap of the data, said with its reason there.
    if (!rank.failed || !rank.not_recorded.empty()) continue;
    if (rank.end == ProcessEnd::kKilledOrCrashed) ++killed;
    if (rank.end == ProcessEnd::kExited) ++exited_nonzero;
    if (rank.end == ProcessEnd::kGone) ++gone;
  }
  auto count = [](int n, const char* one, const char* many) { return absl::StrCat(n, " ", n == 1 ? one : many); };
  if (killed > 0) reasons.push_back(count(killed, "rank was killed or crashed", "ranks were killed or crashed"));
  if (exited_nonzero > 0) {
    reasons.push_back(count(exited_nonzero, "rank exited with a status other than 0",
                            "ranks exited with a status other than 0"));
  }
  if (gone > 0) {
    reasons.push_back(count(gone, "rank is gone without ever calling NCCL", "ranks are gone without ever calling NCCL"));
  }
  // Every rank dead: which was first is where to look.
  if (std::string first = WhoEndedFirstText(info, findings); !first.empty()) reasons.push_back(std::move(first));
  if (info.command_exit_status && *info.command_exit_status != 0 && !info.stopped_by_collwatch) {
    reasons.push_back(absl::StrCat("the command exited with status ", *info.command_exit_status));
  }
  if (const std::string incomplete = DataGapText(info); !incomplete.empty()) reasons.push_back(incomplete);
  if (NothingRecorded(info)) reasons.push_back(kNothingRecordedText);
  std::string text;
  for (size_t i = 0; i < reasons.size(); ++i) absl::StrAppend(&text, i == 0 ? "" : "; ", reasons[i]);
  return text;
}


std::string DataGapText(const ReportInfo& info) {
  std::vector<std::string> gaps;
  if (const std::string missing = MissingRanksText(info); !missing.empty()) gaps.push_back(missing);
  if (const std::string not_recorded = NotRecordedText(info); !not_recorded.empty()) gaps.push_back(not_recorded);
  if (!info.refused_streams.empty()) gaps.push_back(RefusedStreamsGapText(info));
  gaps.insert(gaps.end(), info.data_gaps.begin(), info.data_gaps.end());
  if (gaps.empty()) return "";
  return absl::StrCat("the data is incomplete, and the missing part may hold the problem: ", absl::StrJoin(gaps, "; "));
}

size_t UnresolvedCount(const std::vector<Finding>& findings) {
  return static_cast<size_t>(
      std::count_if(findings.begin(), findings.end(), [](const Finding& finding) { return !finding.resolution; }));
}

size_t HangCount(const std::vector<Finding>& findings) {
  return static_cast<size_t>(std::count_if(findings.begin(), findings.end(), [](const Finding& finding) {
    return !finding.resolution && finding.kind != FindingKind::kOrderInversion;
  }));
}

bool Healthy(const std::vector<Finding>& findings, const ReportInfo& info) {
  if (UnresolvedCount(findings) > 0 || !info.data_gaps.empty() || !info.missing_ranks.empty() ||
      !info.refused_streams.empty() || NothingRecorded(info)) {
    return false;
  }
  for (const RankEnding& rank : info.ranks) {
    if (rank.failed || !rank.not_recorded.empty()) return false;
  }
  return !info.command_exit_status || *info.command_exit_status == 0 || info.stopped_by_collwatch;
}

nlohmann::json CallFramesJson(const CallPath& path) {
  nlohmann::json frames = nlohmann::json::array();
  for (const CallFrame& frame : path.frames) {
    frames.push_back({{"file", frame.file}, {"function", frame.function}, {"line", frame.line}});
  }
  return frames;
}

namespace {

nlohmann::json RefusedStreamsJson(const std::vector<RefusedStream>& streams) {
  nlohmann::json list = nlohmann::json::array();
  for (const RefusedStream& stream : streams) {
    list.push_back({{"job", stream.job}, {"host", stream.host}, {"pid", stream.pid}, {"rank", stream.rank}});
  }
  return list;
}

}  // namespace

nlohmann::json FindingJson(const Finding& finding) {
  nlohmann::json classes = nlohmann::json::array();
  nlohmann::json labels = nlohmann::json::array();
  for (const RankClass& rank_class : finding.rank_classes) {
    classes.push_back(rank_class.ranks);
    labels.push_back(rank_class.label);
  }
  nlohmann::json context = nlohmann::json::array();
  for (const ClassContext& entry : finding.context) context.push_back({{"ranks", entry.ranks}, {"calls", entry.lines}});
  nlohmann::json other_readings = nlohmann::json::array();
  for (FindingKind kind : finding.other_readings) other_readings.push_back(FindingKindName(kind));
  nlohmann::json processes = nlohmann::json::array();
  for (const ProcessReport& process : finding.processes) {
    processes.push_back({{"rank", process.rank},
                         {"global_rank", process.global_rank},
                         {"pid", process.pid},
                         {"host", process.host},
                         {"state", process.state},
                         {"cpu_advancing", process.cpu_advancing},
                         {"heartbeat_age_s", process.heartbeat_age_s},
                         {"heartbeat_fresh", process.heartbeat_fresh},
                         {"ended", process.ended}});
  }
  nlohmann::json call_paths = nlohmann::json::array();
  for (const ClassCallPath& path : finding.call_paths) {
    call_paths.push_back({{"ranks", path.ranks}, {"inferred", path.inferred}, {"truncated", path.path.truncated},
                          {"frames", CallFramesJson(path.path)}});
  }
  auto point_json = [](const std::optional<BranchPoint>& point) -> nlohmann::json {
    if (!point) return nullptr;
    nlohmann::json arms = nlohmann::json::array();
    for (const BranchArm& arm : point->arms) {
      arms.push_back({{"ranks", arm.ranks}, {"line", arm.line}, {"callee", arm.callee}, {"source", arm.source}});
    }
    return {{"function", point->function}, {"file", point->file}, {"arms", arms}, {"text", BranchPointText(*point)}};
  };
  nlohmann::json stacks = nullptr;
  if (finding.stacks) {
    nlohmann::json stack_classes = nlohmann::json::array();
    for (const StackClass& merged : finding.stacks->classes) {
      stack_classes.push_back({{"ranks", merged.ranks}, {"pids", merged.pids}, {"thread", merged.thread},
                               {"where", merged.where}});
    }
    stacks = {{"taken_time", WallClock(finding.stacks->taken_ns)}, {"classes", stack_classes}};
  }
  nlohmann::json branch_point = point_json(finding.branch_point);
  if (finding.branch_point) branch_point["first_parted"] = point_json(finding.first_parted);
  return {{"kind", FindingKindName(finding.kind)},
          {"decided", finding.decided},
          {"other_readings", other_readings},
          {"comm", JsonId(finding.comm_id)},
          {"seq", finding.seq},
          {"point_to_point", std::holds_alternative<P2pFacts>(finding.evidence)},
          {"rank_classes", classes},
          {"rank_class_labels", labels},
          {"lagging_ranks", finding.lagging_ranks},
          {"regions", finding.regions},
          {"call_paths", call_paths},
          {"branch_point", branch_point},
          {"detect_latency_s", finding.detect_latency_s},
          {"resolved", finding.resolution.has_value()},
          {"resolved_after_s",
           finding.resolution ? nlohmann::json(finding.resolution->resolved_after_s) : nlohmann::json(nullptr)},
          {"lag_s", finding.resolution ? nlohmann::json(finding.resolution->lag_s) : nlohmann::json(nullptr)},
          {"first_bad_time", WallClock(finding.first_bad_ns)},
          {"found_time", WallClock(finding.found_ns)},
          {"headline", finding.headline},
          {"summary", finding.summary},
          {"context", context},
          {"processes", processes},
          {"refused_streams", RefusedStreamsJson(finding.refused_streams)},
          {"stacks", stacks},
          {"wait_cycle", WaitCycleJson(finding)}};
}

nlohmann::json ReportJson(const std::vector<Finding>& findings, const ReportInfo& info) {
  nlohmann::json list = nlohmann::json::array();
  for (const Finding& finding : findings) list.push_back(FindingJson(finding));
  nlohmann::json ranks = nlohmann::json::array();
  for (const RankEnding& rank : info.ranks) {
    ranks.push_back({{"global_rank", rank.global_rank},
                     {"pid", rank.pid},
                     {"host", rank.host},
                     {"ended", ProcessEndName(rank.end)},
                     {"exit_code", rank.exit_code ? nlohmann::json(*rank.exit_code) : nlohmann::json(nullptr)},
                     {"last_call", rank.last_call ? nlohmann::json(*rank.last_call) : nlohmann::json(nullptr)},
                     {"not_recorded", rank.not_recorded.empty() ? nlohmann::json(nullptr) : nlohmann::json(rank.not_recorded)}});
  }
  return {{kSchemaVersionKey, kReportSchemaVersion},
          {"collwatch_version", std::string(CollwatchVersionText())},
          {"findings", list},
          {"healthy", Healthy(findings, info)},
          {"ranks", ranks},
          {"command_exit_status",
           info.command_exit_status ? nlohmann::json(*info.command_exit_status) : nlohmann::json(nullptr)},
          {"stopped_by_collwatch", info.stopped_by_collwatch},
          {"job", info.job},
          {"source", info.source},
          {"online", info.online},
          {"processes", info.processes},
          {"rank_count", info.rank_count},
          {"communicators", info.communicators},
          {"calls", info.calls},
          {"lost_records", info.lost_records},
          {"complete", DataGapText(info).empty()},
          {"refused_streams", RefusedStreamsJson(info.refused_streams)},
          {"data_gaps", info.data_gaps},
          {"missing_ranks", info.missing_ranks},
          {"notes", info.notes}};
}

namespace {

// `online`: found while the job ran, so the time to detection means something. Post-mortem
// the analysis ran after the fact: the first bad record's time, and when the trace held
// the whole evidence (replayed in its own time), never a "detection".
std::string FindingTextOf(const Finding& finding, bool online = true, size_t prose_width = kReportProseWidth) {
  std::string text = absl::StrCat(finding.headline, "\n");
  if (online) {
    absl::StrAppendFormat(&text, "  detected %.2f s after the first bad record (%s)\n", finding.detect_latency_s,
                          WallClock(finding.first_bad_ns));
  } else if (finding.detect_latency_s >= 0.005) {
    // Replayed in the trace's own time: when the evidence was all there, not a detection.
    absl::StrAppendFormat(&text, "  first bad record at %s; the evidence was whole %.2f s later (read post-mortem)\n",
                          WallClock(finding.first_bad_ns), finding.detect_latency_s);
  } else {
    absl::StrAppendFormat(&text, "  first bad record at %s (found post-mortem)\n", WallClock(finding.first_bad_ns));
  }
  if (finding.resolution) {
    absl::StrAppendFormat(&text, "  resolved %.2f s after that (%s): %.2f s in all, not a hang\n",
                          finding.resolution->resolved_after_s, WallClock(finding.resolution->resolved_ns),
                          finding.resolution->lag_s);
  }
  for (const RankClass& rank_class : finding.rank_classes) {
    absl::StrAppendFormat(&text, "  %-5s %-16s %s\n", rank_class.ranks.size() == 1 ? "rank" : "ranks",
                          RankListText(rank_class.ranks), rank_class.label);
  }
  if (!finding.lagging_ranks.empty()) {
    absl::StrAppendFormat(&text, "  lagging          %s\n", RankListText(finding.lagging_ranks));
  }
  if (!finding.regions.empty()) {
    absl::StrAppend(&text, "  regions          ");
    for (size_t i = 0; i < finding.regions.size(); ++i) absl::StrAppend(&text, i == 0 ? "" : ", ", finding.regions[i]);
    absl::StrAppend(&text, "\n");
  }
  if (finding.branch_point) {
    absl::StrAppend(&text, "  branch point     ", BranchPointText(*finding.branch_point), "\n");
  }
  if (finding.first_parted) {
    absl::StrAppend(&text, "  first parted     ", BranchPointText(*finding.first_parted), "\n");
  }
  for (const ClassCallPath& path : finding.call_paths) {
    const CallFrame* frame = InnermostUserFrame(path.path);
    if (frame == nullptr) continue;
    absl::StrAppendFormat(&text, "  %-5s %-16s code %s%s\n", path.ranks.size() == 1 ? "rank" : "ranks",
                          RankListText(path.ranks), FrameText(*frame), path.inferred ? " (inferred)" : "");
  }
  const std::string summary =
      prose_width == 0 ? absl::StrCat("  ", finding.summary) : Fold(finding.summary, prose_width, "  ");
  absl::StrAppend(&text, "\n", summary, "\n");
  for (const ClassContext& context : finding.context) {
    absl::StrAppend(&text, "\n  ", context.ranks.size() == 1 ? "rank " : "ranks ", RankListText(context.ranks), ":\n");
    for (const std::string& line : context.lines) absl::StrAppend(&text, "    ", line, "\n");
  }
  if (!finding.processes.empty()) absl::StrAppend(&text, "\n");
  for (const ProcessReport& process : finding.processes) {
    std::string label = absl::StrCat("rank ", process.rank);
    if (process.global_rank >= 0 && process.global_rank != process.rank) absl::StrAppend(&label, " (RANK ", process.global_rank, ")");
    if (process.pid <= 0) {
      // A trace with no process behind it (an imported Flight Recorder dump): its source.
      absl::StrAppendFormat(&text, "  %-16s %s: no process seen, only its trace\n", label, process.host);
      continue;
    }
    std::string details = absl::StrCat("pid ", process.pid, " on ", process.host, ": ", process.state);
    if (process.state != "gone" && process.state != "zombie" && process.state != "unknown") {
      absl::StrAppend(&details, process.cpu_advancing ? ", CPU busy" : ", CPU idle");
    }
    if (process.heartbeat_age_s >= 0) {
      absl::StrAppendFormat(&details, ", heartbeat %.1f s ago%s", process.heartbeat_age_s,
                            process.heartbeat_fresh ? "" : " (stale)");
    } else {
      absl::StrAppend(&details, ", no heartbeat (no ring)");
    }
    if (!process.ended.empty()) absl::StrAppend(&details, ", ", process.ended);
    absl::StrAppendFormat(&text, "  %-16s %s\n", label, details);
  }
  if (finding.stacks) {
    absl::StrAppend(&text, "\n  stacks, taken ", WallClock(finding.stacks->taken_ns), ":\n",
                    StackClassesText(finding.stacks->classes));
  }
  return text;
}

}  // namespace

// Text for a terminal or a file: control characters (from damaged region names, say) shown
// as \xNN, never written raw; line ends and tabs kept.
std::string FindingText(const Finding& finding, size_t prose_width) {
  return TerminalText(FindingTextOf(finding, /*online=*/true, prose_width), LineEnds::kKeep);
}

std::string ReportJsonText(const std::vector<Finding>& findings, const ReportInfo& info) {
  return SafeJsonText(ReportJson(findings, info), 2);
}

namespace {

std::string ReportTextOf(const std::vector<Finding>& findings, const ReportInfo& info) {
  std::string text = absl::StrFormat("collwatch report%s%s (%s", info.job.empty() ? "" : " for job ", info.job,
                                     info.online ? "live" : "post-mortem");
  if (info.processes > 0) {
    absl::StrAppendFormat(&text, ": %d processes", info.processes);
    // A process may hold several ranks (ncclCommInitAll, grouped init).
    if (info.rank_count != info.processes) absl::StrAppendFormat(&text, " holding %d ranks", info.rank_count);
    absl::StrAppendFormat(&text, ", %d communicators, %d NCCL calls", info.communicators, info.calls);
  }
  if (!info.source.empty()) absl::StrAppend(&text, "; from ", info.source);
  absl::StrAppend(&text, ")\n");
  if (info.lost_records > 0) {
    absl::StrAppendFormat(&text, "warning: %d records were lost or damaged before they were read; gaps are skipped\n",
                          info.lost_records);
  }
  for (const std::string& note : info.notes) absl::StrAppend(&text, "note: ", note, "\n");
  if (const std::string missing = MissingRanksText(info); !missing.empty()) {
    absl::StrAppend(&text, "warning: ", missing, "\n");
  }
  if (const std::string not_recorded = NotRecordedText(info); !not_recorded.empty()) {
    absl::StrAppend(&text, "warning: ", not_recorded, "\n");
  }
  for (const std::string& gap : info.data_gaps) absl::StrAppend(&text, "warning: ", gap, "\n");
  const bool healthy = Healthy(findings, info);
  if (findings.empty()) {
    if (healthy) {
      absl::StrAppend(&text, "\nNo findings: every communicator's ranks issued the same collectives in the same "
                             "order, and nothing stalled.\n");
      return text;
    }
    // Nothing diverged or stalled while it ran, but the job did not end well.
    absl::StrAppend(&text, "\nNot healthy: ", WhyNotHealthy(findings, info), ".\n");
    if (!info.ranks.empty()) absl::StrAppend(&text, "\nHow each rank ended:\n", RankEndingLines(info, findings));
    return text;
  }
  const size_t hangs = UnresolvedCount(findings);
  if (hangs == 0) {
    absl::StrAppendFormat(&text, "\n%d finding%s, all stragglers: stalls that resolved, none a hang.\n",
                          findings.size(), findings.size() == 1 ? "" : "s");
  } else if (hangs < findings.size()) {
    absl::StrAppendFormat(&text, "\n%d findings, %d of them stragglers (stalls that resolved); the first unresolved "
                          "one is the cause, later ones may be its echoes.\n", findings.size(), findings.size() - hangs);
  } else {
    absl::StrAppendFormat(&text, "\n%d finding%s; the first is the cause, later ones may be its echoes.\n",
                          findings.size(), findings.size() == 1 ? "" : "s");
  }
  // Made printable once, with the whole report.
  for (size_t i = 0; i < findings.size(); ++i) {
    absl::StrAppend(&text, "\n[", i + 1, "] ", FindingTextOf(findings[i], info.online));
  }
  const bool any_failed = std::any_of(info.ranks.begin(), info.ranks.end(),
                                      [](const RankEnding& rank) { return rank.failed || !rank.not_recorded.empty(); });
  if (any_failed) absl::StrAppend(&text, "\nHow each rank ended:\n", RankEndingLines(info, findings));
  return text;
}

}  // namespace

std::string ReportText(const std::vector<Finding>& findings, const ReportInfo& info) {
  return TerminalText(ReportTextOf(findings, info), LineEnds::kKeep);
}

bool WriteReportFiles(const std::string& dir, const std::vector<Finding>& findings, const ReportInfo& info,
                      std::string* error) {
  const std::pair<std::string, std::string> files[] = {{"report.json", ReportJsonText(findings, info) + "\n"},
                                                       {"report.txt", ReportText(findings, info)}};
  const std::string dot = WaitForGraphDot(findings);
  for (const auto& [name, content] : files) {
    if (absl::Status written = WriteFileReplacing(dir + "/" + name, content); !written.ok()) {
      *error = std::string(written.message());
      return false;
    }
  }
  if (absl::Status written = dot.empty() ? absl::OkStatus() : WriteFileReplacing(dir + "/wait-for.dot", dot); !written.ok()) {
    *error = std::string(written.message());
    return false;
  }
  return true;
}

}  // namespace collwatch::analyzer
