// Trace store folders and ring files into the analyzer's model.
#include "cli/trace_loader.h"

#include <limits.h>
#include <malloc.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
#include <set>
#include <string_view>
#include <thread>

#include "absl/strings/str_cat.h"
#include "analyzer/liveness.h"
#include "cli/ordered_parallel.h"
#include "cli/processes_seen.h"
#include "nlohmann/json.hpp"
#include "ring/clocks.h"
#include "ring/ring_reader.h"
#include "ring/settings.h"
#include "store/event_codec.h"
#include "store/trace_store.h"
#include "store/trace_store_format.h"

namespace collwatch {
namespace {

namespace fs = std::filesystem;
using analyzer::JobModel;

bool IsRankTrace(const fs::path& dir) {
  std::error_code error;
  return fs::exists(dir / store::kLogFileName, error);
}

std::vector<std::string> RankTracesIn(const fs::path& dir) {
  std::vector<std::string> traces;
  std::error_code error;
  for (const auto& entry : fs::directory_iterator(dir, error)) {
    if (entry.is_directory(error) && IsRankTrace(entry.path())) traces.push_back(entry.path().string());
  }
  std::sort(traces.begin(), traces.end());
  return traces;
}

// A copy of a rank trace `seen` has read already: noted in `summary`, not to be read.
bool NotedAsCopy(const std::string& dir, const v1::RankIdentity& identity, LoadSummary* summary,
                 ProcessesSeen* seen) {
  const InputProcess process_seen{dir,           identity.job(), identity.host(), identity.pid(),
                                  identity.start_realtime_ns(), identity.rank()};
  const std::string first = seen->CopyOf(process_seen);
  if (!first.empty()) summary->notes.push_back(ProcessesSeen::CopyNote(process_seen, first));
  return !first.empty();
}

// A rank trace as a worker thread reads it: opened, its events read and converted, and
// (where that pays) built into a model of its own. The job's model, the summary and the
// copies seen are the calling thread's (ApplyRankTrace).
struct ReadRankTrace {
  absl::StatusOr<std::unique_ptr<RankTraceReader>> reader;
  absl::Status read = absl::OkStatus();  // reading its events (after it opened)
  size_t records = 0;
  analyzer::ProcessBuiltApart built;
};

// Its records, each as it is decoded, into `alone` as `process`: its names first, its status
// last (the order of a whole trace's update). Counted into `records`.
absl::Status StreamRankTrace(const RankTraceReader& reader, JobModel& alone, analyzer::ProcessId process,
                             size_t* records) {
  ProcessUpdate framing = ProcessUpdateFromStore({}, reader.regions(), reader.call_paths(), reader.status());
  alone.Apply(process, NamesPieceOf(framing));
  absl::Status read = reader.ForEachRecord([&](const IndexedRecord& item) {
    alone.AddRecord(process, item.lane, item.index, item.record);
    ++*records;
  });
  if (!read.ok()) return read;
  alone.Apply(process, StatusPieceOf(framing));
  return absl::OkStatus();
}

ReadRankTrace ReadRankTraceApart(const std::string& dir, bool build_apart, const analyzer::FoldReferences* references) {
  ReadRankTrace trace{RankTraceReader::Open(dir)};
  if (!trace.reader.ok()) return trace;
  RankTraceReader& reader = **trace.reader;
  ProcessInfo info = ProcessInfoFromIdentity(reader.identity());
  if (build_apart) {
    // Streamed into its model, not kept: taken again from the folder where it cannot be
    // adopted (ApplyRankTrace).
    absl::StatusOr<analyzer::ProcessBuiltApart> built = analyzer::BuildProcessApartStreamed(
        std::move(info),
        [&](JobModel& alone, analyzer::ProcessId process) {
          return StreamRankTrace(reader, alone, process, &trace.records);
        },
        references);
    if (built.ok()) {
      trace.built = *std::move(built);
    } else {
      trace.read = built.status();
    }
    return trace;
  }
  absl::StatusOr<std::vector<IndexedRecord>> records = reader.ReadAllRecords();
  if (!records.ok()) {
    trace.read = records.status();
    return trace;
  }
  trace.records = records->size();
  trace.built.info = std::move(info);
  trace.built.update = ProcessUpdateFromStore(*std::move(records), reader.regions(), reader.call_paths(),
                                              reader.status());
  return trace;
}

// Into the model, as OpenRankTraceOnce and one reading in order would: a copy of a
// process seen already is noted and left out, whether or not its events could be read.
absl::Status ApplyRankTrace(const std::string& dir, ReadRankTrace trace, JobModel* model, LoadSummary* summary,
                            ProcessesSeen* seen, const TraceApplied& applied) {
  if (!trace.reader.ok()) return trace.reader.status();
  const RankTraceReader& reader = **trace.reader;
  const v1::RankIdentity& identity = reader.identity();
  if (NotedAsCopy(dir, identity, summary, seen)) return absl::OkStatus();
  if (!trace.read.ok()) return trace.read;
  std::optional<analyzer::ProcessId> process = analyzer::TakeBuiltProcess(model, std::move(trace.built));
  if (!process) {
    // Built apart but not adoptable, and not kept: read again whole, applied here.
    ReadRankTrace again = ReadRankTraceApart(dir, /*build_apart=*/false, nullptr);
    if (!again.reader.ok()) return again.reader.status();
    if (!again.read.ok()) return again.read;
    process = analyzer::TakeBuiltProcess(model, std::move(again.built));
  }
  for (const v1::ProcessStacks& stacks : reader.stacks()) {
    model->AddStacks(*process, StacksFromWire(stacks), stacks.taken_ns());
  }
  if (applied) applied(*process);
  NoteRankTraceGaps(dir, reader, summary);
  if (summary->job.empty()) summary->job = identity.job();
  summary->records += trace.records;
  summary->inputs.push_back(dir);
  return absl::OkStatus();
}

absl::Status LoadRing(const std::string& path, JobModel* model, LoadSummary* summary, ProcessesSeen* seen,
                      const TraceApplied& applied) {
  absl::StatusOr<std::unique_ptr<RingReader>> reader = OpenRingOnce(path, summary, seen);
  if (!reader.ok()) return reader.status();
  if (*reader == nullptr) return absl::OkStatus();
  const RingIdentity& identity = (*reader)->identity();
  const ring::WriterState state = (*reader)->writer_state();
  const bool alive = state == ring::WriterState::kRunning && (*reader)->WriterProcessAlive();
  ReadBatch batch = (*reader)->ReadAll(/*writer_gone=*/!alive);
  const uint64_t lost = batch.lost, torn = batch.torn, damaged = batch.damaged, records = batch.records.size();
  const analyzer::ProcessId process = model->AddProcess(ProcessInfoOfRing(identity));
  model->Apply(process, ProcessUpdateFromRing(**reader, std::move(batch), MonotonicClockNs()));
  // A writer still alive on this host: what is it doing? (SecondLook adds whether its CPU
  // time advances.)
  if (alive && identity.host == ThisHostName()) {
    model->SetSample(process, SampleProcess(identity.pid, nullptr, static_cast<int64_t>(RealtimeNs())));
  }
  if (applied) applied(process);
  NoteRingGaps(path, lost, torn, damaged, (*reader)->dropped(), summary);
  if (summary->job.empty()) summary->job = identity.job;
  summary->records += records;
  summary->inputs.push_back(path);
  return absl::OkStatus();
}

// Why `path` cannot be looked at, in words that name the real cause (stat's errno); OK
// when it can. A missing path is NOT_FOUND; one this user may not search or read is
// PERMISSION_DENIED, never "no such file" or "no traces here"; a path the kernel takes
// no more of than PATH_MAX bytes says so with its length.
absl::Status PathProblem(const std::string& path) {
  struct stat status {};
  if (stat(path.c_str(), &status) == 0) {
    // The folder (or file) itself must be readable: else its listing is silently empty.
    const int wanted = S_ISDIR(status.st_mode) ? R_OK | X_OK : R_OK;
    if (access(path.c_str(), wanted) == 0 || errno != EACCES) return absl::OkStatus();
    return absl::PermissionDeniedError(
        absl::StrCat(path, ": permission denied (this user may not ",
                     S_ISDIR(status.st_mode) ? "list the folder" : "read the file", ")"));
  }
  const int error = errno;
  switch (error) {
    case ENOENT:
    case ENOTDIR:
      return absl::NotFoundError(absl::StrCat(path, ": no such file or folder"));
    case EACCES:
      return absl::PermissionDeniedError(
          absl::StrCat(path, ": permission denied (a folder on its way may not be searched by this user)"));
    case ENAMETOOLONG:
      // The path itself is shown cut: thousands of bytes would hide the words.
      if (path.size() >= PATH_MAX) {
        return absl::InvalidArgumentError(absl::StrCat(path.substr(0, 64), "...: path too long (", path.size(),
                                                       " bytes, the limit is ", PATH_MAX,
                                                       "): give a shorter one, or cd nearer and give it relative"));
      }
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": a name in the path is longer than ", NAME_MAX, " bytes, the limit of one name"));
    default:
      return absl::InvalidArgumentError(absl::StrCat(path, ": ", std::strerror(error)));
  }
}

// The folders in `dir` this user may not list: their traces, if any, cannot be seen.
std::vector<std::string> UnreadableFoldersIn(const fs::path& dir) {
  std::vector<std::string> unreadable;
  std::error_code error;
  for (const auto& entry : fs::directory_iterator(dir, error)) {
    if (entry.is_directory(error) && access(entry.path().c_str(), R_OK | X_OK) != 0 && errno == EACCES) {
      unreadable.push_back(entry.path().filename().string());
    }
  }
  std::sort(unreadable.begin(), unreadable.end());
  return unreadable;
}

// A second look, a moment after the first, at the processes whose rings were read while
// they ran: whether their CPU time still advances. One pause for all of them.
void SecondLook(JobModel* model) {
  std::vector<analyzer::ProcessId> sampled;
  for (size_t id = 0; id < model->process_count(); ++id) {
    if (model->process(static_cast<analyzer::ProcessId>(id)).sample.sampled_ns != 0) {
      sampled.push_back(static_cast<analyzer::ProcessId>(id));
    }
  }
  if (sampled.empty()) return;
  // Several clock ticks (10 ms each) of a busy process.
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  for (const analyzer::ProcessId id : sampled) {
    const analyzer::Process& process = model->process(id);
    const ProcessSample first = process.sample;
    model->SetSample(id, SampleProcess(process.info.pid, &first, static_cast<int64_t>(RealtimeNs())));
  }
}

// The ranks `collwatch run` saw in its command's process tree (run.json
// `rank_processes`), some perhaps before (or without) any NCCL call: ObserveProcess adds
// those that have no trace and updates the others' samples.
void ObserveRunProcesses(const std::map<pid_t, RankProcess>& ranks, JobModel* model) {
  for (const auto& [pid, rank] : ranks) model->ObserveProcess(rank.info, rank.sample);
}

// After every input was looked at: two processes of one rank are an error, and so is a
// load that could read none.
absl::Status LoadedAll(const ProcessesSeen& seen, size_t inputs, const LoadSummary& summary) {
  if (absl::Status clash = seen.RankClash(); !clash.ok()) return clash;
  if (summary.inputs.empty()) {
    return absl::DataLossError(absl::StrCat("none of the ", inputs, " inputs could be read"));
  }
  return absl::OkStatus();
}

void SkipInput(const std::string& input, const absl::Status& status, LoadSummary* summary) {
  if (!status.ok()) summary->warnings.push_back(absl::StrCat(input, ": skipped: ", status.message()));
}

// Loads each input; a damaged one is a warning, not the end. A copy of an input is read
// once; two processes of one rank of one job are never one job (ProcessesSeen).
template <typename Loader>
absl::Status LoadAll(const std::vector<std::string>& inputs, Loader load, JobModel* model, LoadSummary* summary) {
  ProcessesSeen seen;
  for (const std::string& input : inputs) SkipInput(input, load(input, model, summary, &seen), summary);
  return LoadedAll(seen, inputs.size(), *summary);
}

// Each worker frees what one trace's reading and building took before it takes the next.
// glibc's defaults hand a thread heap's free top back to the kernel past 128 KiB and map
// blocks of a few MiB apart, and the next trace faults that memory in again: with these
// (a few MiB a thread kept), `collwatch analyze` of the 4,096-rank store, its traces streamed,
// went from 2.5-3.1 s to 1.8 s on 2 cores, mostly system time (docs/performance.md, tenth stage).
void KeepFreedMemoryForTheNextTrace() {
  mallopt(M_MMAP_THRESHOLD, 4 << 20);
  mallopt(M_TRIM_THRESHOLD, 8 << 20);
}

// Rank traces read on every core (each decoded, and where that pays built into a model of
// its own there) and taken into the job's model in their order (JobModel::Adopt), so the
// model is the one reading them one by one would give.
absl::Status LoadRankTraces(const std::vector<std::string>& inputs, JobModel* model, LoadSummary* summary,
                            const LoadProgress& progress, const TraceApplied& applied) {
  KeepFreedMemoryForTheNextTrace();
  ProcessesSeen seen;
  const unsigned threads = std::max(1u, std::thread::hardware_concurrency());
  const std::string_view build_apart_setting = SettingValue(Setting::kBuildApart);
  const bool build_apart = build_apart_setting == "on"    ? true
                           : build_apart_setting == "off" ? false
                                                          : analyzer::BuildingApartPays(threads);
  // Where the model folds as it loads (Analyzer::FoldLoadedProcess), the workers fold too.
  const analyzer::FoldReferences* references = build_apart ? model->fold_references() : nullptr;
  OrderedParallel<ReadRankTrace>(
      inputs.size(), threads, 2 * threads,
      [&](size_t i) { return ReadRankTraceApart(inputs[i], build_apart, references); },
      [&](size_t i, ReadRankTrace trace) {
        SkipInput(inputs[i], ApplyRankTrace(inputs[i], std::move(trace), model, summary, &seen, applied), summary);
        if (progress) progress(i + 1, inputs.size());
      });
  return LoadedAll(seen, inputs.size(), *summary);
}

// "a (2 rings), b (1 ring)"
std::string JobsText(const std::map<std::string, int>& rings_by_job) {
  std::string text;
  for (const auto& [job, rings] : rings_by_job) {
    absl::StrAppend(&text, text.empty() ? "" : ", ", job, " (", rings, rings == 1 ? " ring)" : " rings)");
  }
  return text;
}

// The rings (and notes of rings not made) of one job in a ring folder. Rings of several
// jobs are never read as one job: without `job`, that is an error naming them.
absl::StatusOr<TraceSources> RingsOfJob(const std::string& path, std::vector<std::string> rings,
                                        const std::string& job) {
  TraceSources sources;
  sources.kind = TraceSources::Kind::kRings;
  std::map<std::string, int> rings_by_job;
  std::vector<std::pair<std::string, std::string>> job_of_ring;  // unreadable rings: job ""
  for (std::string& ring : rings) {
    absl::StatusOr<std::unique_ptr<RingReader>> reader = RingReader::Open(ring);
    const std::string ring_job = reader.ok() ? (*reader)->identity().job : "";
    if (reader.ok()) ++rings_by_job[ring_job];
    job_of_ring.emplace_back(std::move(ring), ring_job);
  }
  std::vector<NoRingNoteRead> notes = ListNoRingNotes(path);
  for (const NoRingNoteRead& note : notes) rings_by_job.try_emplace(note.job, 0);
  if (job.empty() && rings_by_job.size() > 1) {
    return absl::InvalidArgumentError(absl::StrCat(path, " holds rings of several jobs: ", JobsText(rings_by_job),
                                                   "; pick one with --job"));
  }
  if (!job.empty() && !rings_by_job.count(job)) {
    return absl::NotFoundError(absl::StrCat(path, " holds no ring of job ", job, " (it holds ",
                                            rings_by_job.empty() ? "none readable" : JobsText(rings_by_job), ")"));
  }
  // A ring that cannot be read is the one job's (it is warned about), or of none picked.
  for (auto& [ring, ring_job] : job_of_ring) {
    if (ring_job == job || (job.empty() || ring_job.empty())) sources.paths.push_back(std::move(ring));
  }
  for (NoRingNoteRead& note : notes) {
    if (job.empty() || note.job == job) sources.no_rings.push_back(std::move(note));
  }
  return sources;
}

// A rank the preload made no ring for: a process of the job seen only through its note,
// with the reason the report gives for it.
void AddNoRingNote(const NoRingNoteRead& note, JobModel* model, LoadSummary* summary) {
  model->NoteNoRing(note);
  summary->warnings.push_back(NotRecordedText(note));
  if (summary->job.empty()) summary->job = note.job;
}

}  // namespace

void DescribeSources(const TraceSources& sources, LoadSummary* summary) {
  if (!sources.run_record_lost.empty()) {
    summary->warnings.push_back(absl::StrCat(sources.run_record_lost,
                                             ": the run's record could not be read, so how the job's command "
                                             "ended (its exit status), whether collwatch stopped it and the "
                                             "ranks it saw are unknown"));
  }
  if (const std::optional<RunRecord>& run = sources.run) {
    summary->job = run->job;
    summary->stall_after_s = run->stall_after_s;
    summary->stopped_at_ns = run->stopped_at_ns;
    if (run->exit_status >= 0) summary->command_exit_status = run->exit_status;
  }
  summary->source = sources.kind == TraceSources::Kind::kRings ? "rings" : "trace store";
  if (const std::optional<flight_recorder::ImportRecord>& import = sources.import) {
    summary->source = "PyTorch Flight Recorder dumps, imported";
    summary->imported = true;
    summary->job = import->job;
    summary->stall_after_s = import->stall_after_s;
    // What the import said of the dumps (histories cut, entries left out, ranks that wrote
    // none): notes; a rank without a dump is a missing rank of the report all the same.
    summary->notes.insert(summary->notes.end(), import->notes.begin(), import->notes.end());
    // Files that may have held a rank's dump and were not read: the data is incomplete.
    for (const std::string& file : import->not_read) {
      summary->warnings.push_back(file + " (a Flight Recorder dump there is lost to the analysis)");
    }
    if (!import->as_of_basis.empty()) summary->notes.push_back("analysed as of " + import->as_of_basis);
    for (const flight_recorder::GroupHistory& group : import->cut_groups) {
      summary->compared_from_seq[group.comm_id] = group.compared_from_seq;
    }
  }
}

void NoteRankTraceGaps(const std::string& dir, const RankTraceReader& reader, LoadSummary* summary) {
  if (reader.damaged_bytes() > 0) {
    const uint32_t places = reader.damaged_regions();
    summary->warnings.push_back(absl::StrCat(dir, ": ", reader.damaged_bytes(), " damaged bytes in ", places,
                                             places == 1 ? " place" : " places",
                                             " skipped (the records there are lost; those around them were read)"));
  }
  if (reader.torn_tail_bytes() > 0) {
    summary->warnings.push_back(absl::StrCat(dir, ": torn tail of ", reader.torn_tail_bytes(),
                                             " bytes ignored (the collector stopped mid-write)"));
  }
  const v1::StoredStatus& status = reader.status();
  if (status.lost() + status.torn() > 0) {
    summary->warnings.push_back(absl::StrCat(dir, ": ", status.lost() + status.torn(),
                                             " records were lost in the ring before they were shipped"));
  }
}

void NoteRingGaps(const std::string& path, uint64_t lost, uint64_t torn, uint64_t damaged, uint64_t dropped,
                  LoadSummary* summary) {
  // Overwritten records are the ring's older history, gone by design as in any ring (a
  // note); torn or dropped ones are a gap in what it kept.
  if (lost > 0) {
    summary->notes.push_back(absl::StrCat(path, ": its first ", lost,
                                          " records were overwritten by later ones; its history starts after them"));
  }
  if (torn + dropped > 0) {
    summary->warnings.push_back(absl::StrCat(path, ": ", torn, " records torn, ", dropped, " dropped by the writer"));
  }
  if (damaged > 0) {
    summary->warnings.push_back(absl::StrCat(path, ": ", damaged,
                                             damaged == 1 ? " record damaged (its slot holds" : " records damaged (their slots hold",
                                             " what no write of the ring left)"));
  }
}

absl::StatusOr<TraceSources> FindTraces(const std::string& path, const std::string& job) {
  std::error_code error;
  const fs::path root(path);
  if (absl::Status problem = PathProblem(path); !problem.ok()) return problem;
  TraceSources sources;
  if (fs::is_regular_file(root, error)) {
    sources.kind = TraceSources::Kind::kRings;
    sources.paths = {path};
    return sources;
  }
  if (IsRankTrace(root)) {
    sources.paths = {path};
    return sources;
  }
  // A `collwatch run` output folder names its job. Its run.json there but unreadable (cut
  // short, a FIFO, a link to a device) is a record lost, said as such: it held how the
  // job ended, and without it a failed job read as healthy.
  absl::StatusOr<RunRecord> run_or = ReadRunRecordOrWhy(path);
  if (!run_or.ok() && !absl::IsNotFound(run_or.status())) {
    sources.run_record_lost = std::string(run_or.status().message());
  }
  if (std::optional<RunRecord> run = run_or.ok() ? std::optional<RunRecord>(*std::move(run_or)) : std::nullopt) {
    sources.paths = ListRankTraces(path, run->job);
    sources.paths_from_run = !sources.paths.empty();
    sources.run = std::move(run);
    if (sources.paths_from_run) return sources;
  }
  if (std::optional<flight_recorder::ImportRecord> import = flight_recorder::ReadImportRecord(path)) {
    sources.paths = ListRankTraces(path, import->job);
    sources.import = std::move(import);
    if (!sources.paths.empty()) return sources;
  }
  if (std::vector<std::string> traces = RankTracesIn(root); !traces.empty()) {
    sources.paths = std::move(traces);
    return sources;
  }
  // An output folder without run.json (a standalone collector's): one job folder in it.
  std::vector<fs::path> job_dirs;
  for (const auto& entry : fs::directory_iterator(root, error)) {
    if (entry.is_directory(error) && !RankTracesIn(entry.path()).empty()) job_dirs.push_back(entry.path());
  }
  if (!job.empty()) {
    std::erase_if(job_dirs, [&](const fs::path& dir) { return dir.filename().string() != job; });
  }
  if (job_dirs.size() == 1) {
    sources.paths = RankTracesIn(job_dirs[0]);
    return sources;
  }
  if (job_dirs.size() > 1) {
    std::string names;
    for (const fs::path& dir : job_dirs) absl::StrAppend(&names, names.empty() ? "" : ", ", dir.filename().string());
    return absl::InvalidArgumentError(
        absl::StrCat(path, " holds several jobs (", names, "): pick one with --job, or name its folder"));
  }
  absl::StatusOr<std::vector<std::string>> rings = ListRingFiles(path);
  if (rings.ok() && (!rings->empty() || !ListNoRingNotes(path).empty())) {
    absl::StatusOr<TraceSources> ring_sources = RingsOfJob(path, *std::move(rings), job);
    if (ring_sources.ok()) ring_sources->run_record_lost = sources.run_record_lost;
    return ring_sources;
  }
  if (const std::vector<std::string> unreadable = UnreadableFoldersIn(root); !unreadable.empty()) {
    // Traces may be there, out of this user's sight: say so rather than "none".
    std::string names;
    for (const std::string& name : unreadable) absl::StrAppend(&names, names.empty() ? "" : ", ", name);
    if (unreadable.size() > 1) {
      return absl::PermissionDeniedError(absl::StrCat(path, ": permission denied: this user may not list ",
                                                      unreadable.size(), " folders in it (", names, ")"));
    }
    return absl::PermissionDeniedError(
        absl::StrCat(path, ": permission denied: this user may not list the folder ", names, " in it"));
  }
  return absl::NotFoundError(absl::StrCat(path, ": no collwatch traces here (expected run.json, rank trace "
                                          "folders with ", store::kLogFileName, ", or *.ring files)"));
}

absl::StatusOr<std::unique_ptr<RingReader>> OpenRingOnce(const std::string& path, LoadSummary* summary,
                                                         ProcessesSeen* seen) {
  absl::StatusOr<std::unique_ptr<RingReader>> reader = RingReader::Open(path);
  if (!reader.ok()) return reader.status();
  const RingIdentity& identity = (*reader)->identity();
  const InputProcess process_seen{path, identity.job, identity.host, identity.pid, identity.start_realtime_ns,
                                  identity.rank};
  if (const std::string first = seen->CopyOf(process_seen); !first.empty()) {
    summary->notes.push_back(ProcessesSeen::CopyNote(process_seen, first));
    return std::unique_ptr<RingReader>();
  }
  return reader;
}

absl::StatusOr<std::unique_ptr<RankTraceReader>> OpenRankTraceOnce(const std::string& dir, LoadSummary* summary,
                                                                   ProcessesSeen* seen) {
  absl::StatusOr<std::unique_ptr<RankTraceReader>> reader = RankTraceReader::Open(dir);
  if (!reader.ok()) return reader.status();
  if (NotedAsCopy(dir, (*reader)->identity(), summary, seen)) return std::unique_ptr<RankTraceReader>();
  return reader;
}

absl::Status LoadTraces(const std::string& path, JobModel* model, LoadSummary* summary, const std::string& job,
                        const LoadProgress& progress, const TraceApplied& applied) {
  absl::StatusOr<TraceSources> sources = FindTraces(path, job);
  if (!sources.ok()) return sources.status();
  DescribeSources(*sources, summary);
  if (sources->kind == TraceSources::Kind::kRings) {
    auto load_ring = [&](const std::string& ring, JobModel* into, LoadSummary* said, ProcessesSeen* seen) {
      return LoadRing(ring, into, said, seen, applied);
    };
    absl::Status loaded = LoadAll(sources->paths, load_ring, model, summary);
    for (const NoRingNoteRead& note : sources->no_rings) AddNoRingNote(note, model, summary);
    // Ranks that could make no ring are something to report, even when none could.
    if (sources->paths.empty() && !sources->no_rings.empty()) loaded = absl::OkStatus();
    SecondLook(model);
    return loaded;
  }
  const absl::Status loaded = LoadRankTraces(sources->paths, model, summary, progress, applied);
  if (loaded.ok() && sources->paths_from_run) ObserveRunProcesses(sources->run->rank_processes, model);
  return loaded;
}

bool LoadTracesForCommand(const std::string& command, const std::string& path, JobModel* model, LoadSummary* summary,
                          std::ostream& err, const std::string& job, const TraceApplied& applied) {
  // On a terminal, a line that counts the rank traces read (a large store takes a while),
  // rewritten at most ten times a second and cleared when done.
  const bool on_terminal = &err == &std::cerr && isatty(STDERR_FILENO) == 1;
  auto last_shown = std::chrono::steady_clock::time_point{};
  bool shown = false;
  const LoadProgress progress = [&](size_t done, size_t total) {
    const auto now = std::chrono::steady_clock::now();
    if (!on_terminal || total < 2 || (done < total && now - last_shown < std::chrono::milliseconds(100))) return;
    last_shown = now;
    shown = true;
    err << "\rcollwatch " << command << ": read " << done << " of " << total << " rank traces" << std::flush;
  };
  const absl::Status status = LoadTraces(path, model, summary, job, progress, applied);
  if (shown) err << "\r\033[K" << std::flush;
  for (const std::string& warning : summary->warnings) {
    err << "collwatch " << command << ": warning: " << warning << "\n";
  }
  if (!status.ok()) {
    err << "collwatch " << command << ": " << status.message() << "\n";
    return false;
  }
  if (model->unmatched_records() > 0) {
    err << "collwatch " << command << ": warning: " << path << ": " << model->unmatched_records()
        << " records could not be placed (no communicator, or their call was lost)\n";
  }
  return true;
}

}  // namespace collwatch
