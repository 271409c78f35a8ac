// Trace store folders and ring files read process by process, in pieces (see trace_pieces.h).
#include "cli/trace_pieces.h"

#include <algorithm>
#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "cli/processes_seen.h"
#include "ring/clocks.h"
#include "ring/ring_reader.h"
#include "store/event_codec.h"

namespace collwatch {
namespace {

absl::Status VisitRankTrace(const std::string& dir, ProcessVisitor* visitor, LoadSummary* summary,
                            ProcessesSeen* seen) {
  absl::StatusOr<std::unique_ptr<RankTraceReader>> reader = OpenRankTraceOnce(dir, summary, seen);
  if (!reader.ok()) return reader.status();
  if (*reader == nullptr) return absl::OkStatus();
  const v1::RankIdentity& identity = (*reader)->identity();
  NoteRankTraceGaps(dir, **reader, summary);
  if (summary->job.empty()) summary->job = identity.job();
  summary->inputs.push_back(dir);
  if (!visitor->Begin(ProcessInfoFromIdentity(identity))) return absl::OkStatus();
  // Names and status as the whole trace gives them, with none of its events.
  ProcessUpdate framing =
      ProcessUpdateFromStore({}, (*reader)->regions(), (*reader)->call_paths(), (*reader)->status());
  visitor->Piece(NamesPieceOf(framing));
  const absl::Status read = (*reader)->ForEachEventsFrame([&](std::vector<v1::Event>& events) {
    ProcessUpdate piece;
    piece.records.reserve(events.size());
    for (const v1::Event& event : events) {
      piece.records.push_back(IndexedRecord{event.lane(), event.index(), RecordFromEvent(event)});
    }
    summary->records += events.size();
    visitor->Piece(piece);
    return absl::OkStatus();
  });
  visitor->Piece(StatusPieceOf(framing));
  visitor->End();
  return read;
}

absl::Status VisitRing(const std::string& path, ProcessVisitor* visitor, LoadSummary* summary, ProcessesSeen* seen) {
  absl::StatusOr<std::unique_ptr<RingReader>> reader = OpenRingOnce(path, summary, seen);
  if (!reader.ok()) return reader.status();
  if (*reader == nullptr) return absl::OkStatus();
  const RingIdentity& identity = (*reader)->identity();
  const bool alive = (*reader)->writer_state() == ring::WriterState::kRunning && (*reader)->WriterProcessAlive();
  // A ring is as large as it was made, whatever the job did: read whole, handed on in pieces.
  ReadBatch batch = (*reader)->ReadAll(/*writer_gone=*/!alive);
  NoteRingGaps(path, batch.lost, batch.torn, batch.damaged, (*reader)->dropped(), summary);
  if (summary->job.empty()) summary->job = identity.job;
  summary->inputs.push_back(path);
  summary->records += batch.records.size();
  if (!visitor->Begin(ProcessInfoOfRing(identity))) return absl::OkStatus();
  ProcessUpdate whole = ProcessUpdateFromRing(**reader, std::move(batch), MonotonicClockNs());
  visitor->Piece(NamesPieceOf(whole));
  for (size_t i = 0; i < whole.records.size(); i += kPieceRecords) {
    ProcessUpdate piece;
    const auto from = whole.records.begin() + static_cast<std::ptrdiff_t>(i);
    piece.records.assign(from, from + static_cast<std::ptrdiff_t>(std::min(kPieceRecords, whole.records.size() - i)));
    visitor->Piece(piece);
  }
  visitor->Piece(StatusPieceOf(whole));
  visitor->End();
  return absl::OkStatus();
}

}  // namespace

absl::Status VisitTraces(const TraceSources& sources, ProcessVisitor* visitor, LoadSummary* summary) {
  DescribeSources(sources, summary);
  const bool rings = sources.kind == TraceSources::Kind::kRings;
  ProcessesSeen seen;
  for (const std::string& input : sources.paths) {
    const absl::Status visited =
        rings ? VisitRing(input, visitor, summary, &seen) : VisitRankTrace(input, visitor, summary, &seen);
    if (!visited.ok()) summary->warnings.push_back(absl::StrCat(input, ": skipped: ", visited.message()));
  }
  if (absl::Status clash = seen.RankClash(); !clash.ok()) return clash;
  if (summary->inputs.empty()) {
    return absl::DataLossError(absl::StrCat("none of the ", sources.paths.size(), " inputs could be read"));
  }
  return absl::OkStatus();
}

}  // namespace collwatch
