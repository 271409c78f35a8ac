// A run's processes read one at a time, each in pieces, never whole: how the commands that
// stream a run of any size (export) read the traces LoadTraces reads (trace_loader.h).
// Threading: single-threaded.
#ifndef COLLWATCH_CLI_TRACE_PIECES_H_
#define COLLWATCH_CLI_TRACE_PIECES_H_

#include <cstddef>

#include "absl/status/status.h"
#include "cli/trace_loader.h"
#include "process/process_info.h"
#include "process/process_update.h"

namespace collwatch {

// Records of a ring per piece (a trace store's pieces are its stored frames).
inline constexpr size_t kPieceRecords = 4096;

// Receives each process: Begin, then (when it returns true) its pieces and End.
class ProcessVisitor {
 public:
  virtual ~ProcessVisitor() = default;
  virtual bool Begin(const ProcessInfo& info) = 0;
  // Its region names and call paths first, then its records in order, then its status
  // (heartbeat, what was lost, its exit) in a last piece: JobModel::Apply's form.
  virtual void Piece(const ProcessUpdate& piece) = 0;
  virtual void End() = 0;
};

// Each input of `sources` (FindTraces) in turn, as LoadTraces takes them (a copied input
// read once, two processes of one rank of one job refused), handed to `visitor`. What
// LoadTraces notes and warns of goes to `summary`. Errors as LoadTraces's.
absl::Status VisitTraces(const TraceSources& sources, ProcessVisitor* visitor, LoadSummary* summary);

}  // namespace collwatch

#endif  // COLLWATCH_CLI_TRACE_PIECES_H_
