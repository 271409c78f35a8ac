// The phrases findings are written with: ranks, calls, runs of calls, regions, where ranks
// sit in the job, what holds a process up, and the fixes several kinds share; worded so
// that a job without NVTX ranges reads as naturally as one with them. finding_text.h
// builds each kind's words from these.
// Threading: pure functions.
#ifndef COLLWATCH_ANALYZER_FINDING_WORDS_H_
#define COLLWATCH_ANALYZER_FINDING_WORDS_H_

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "analyzer/finding.h"
#include "analyzer/job_model.h"

namespace collwatch::analyzer {

// "rank 3", "ranks 0,2", "all ranks but 5".
std::string RanksText(const std::vector<int32_t>& ranks, int32_t nranks);
// `verb` agreeing with RanksText(ranks) as its subject: "wait" -> "waits" for one rank.
std::string RanksVerb(const std::vector<int32_t>& ranks, std::string_view verb);
// `text` opening a sentence: its first letter a capital ("ranks 0,2" -> "Ranks 0,2").
std::string Capitalized(std::string text);

// What a process's damaged labels (Process::damaged_labels) take from the comparison, as
// a data gap: "rank 1 (node0, pid 5001): 3 calls name an NVTX region or a call path that
// could not be read (damaged or lost; the first at comm ... #4): their regions are unknown
// and the comparison skipped them". "" when none.
std::string DamagedLabelsText(const Process& process);

// "all-gather 1.5 MiB (393216 x float32) in fwd/vision.block0"
std::string DescribeCall(const CallFacts& call);
std::string DescribeCall(const JobModel& model, const Call& call);
// " in fwd/embed", or "" for a call outside any NVTX range.
std::string InRegionText(const CallFacts& call);
// "fwd/a, fwd/b and 3 more" ("" for none).
std::string RegionListText(const std::vector<std::string>& regions, size_t max_names = 6);
// A run of calls by op and size: "5 all-gathers (6.0 MiB x4, 3.0 MiB)",
// "1 reduce-scatter of 2.0 MiB, 2 all-gathers of 8.0 MiB".
std::string RunText(std::span<const CallFacts> calls);
// A run with its regions where it has any: "5 all-gathers of 6.0 MiB in fwd/vision.*".
std::string RunWithRegions(std::span<const CallFacts> calls);
// One line of a finding's aligned context: "> seq 41     all-gather ...".
std::string ContextLine(char mark, const CallFacts& call);

// What a finding appends to communicator ranks so that people find them in the job:
// " (global ranks 4,6)", " (in the process of ranks 0-1 (node0, pid 4242))", or "".
std::string JobRanksNote(const JobPlace& place);
// "ranks 0,2 (global ranks 4,6)": a class's ranks with where they sit in the job.
std::string ClassRanksText(int32_t nranks, const DivergingClass& rank_class);
// What a divergence's words about its two largest classes leave out: " 3 classes in all;
// also rank 3 issued ...", " rank 5 had not reached seq 41 yet." ("" for nothing).
std::string OthersText(const Finding& finding, const DivergenceFacts& divergence);
// "comm 3f2a9c01 seq 7 (all-gather ...)": a collective a finding is about.
std::string CollectiveText(uint64_t comm_id, uint64_t seq, const CallFacts& call);
// "PATH_DIVERGENCE or OP_MISMATCH"
std::string KindsText(const std::vector<FindingKind>& kinds);

// Why a rank's process cannot take part: "its process (pid 7 on node1) is stopped: ..."
// ("" for ProcessTrouble::kNone).
std::string TroubleText(const StalledRank& rank);
// The same in a headline's word: "stopped" or "in uninterruptible I/O".
std::string TroubleWord(const StalledRank& rank);
// "rank 3 (global rank 7): its process (pid ...) is stopped: ..."
std::string RankTroubleText(const StalledRank& rank);
// What a rank that has not joined collective `waited_seq` is doing: "Rank 1 is at seq 4;
// its last NCCL call was all-reduce 2.0 s ago, finished (process sleeping, CPU advancing)".
std::string LateRankText(const StalledRank& rank, uint64_t waited_seq);

// The fix for a path divergence, told in the regions' words where they name a vision tower.
std::string PathFix(const std::vector<std::string>& regions);
// What differing tensor sizes mean, and their fix (`ratio`: bytes of one side / the other).
std::string SizeMismatchFix(double ratio);

// What an undecided OP_MISMATCH could also be, and how to tell which (empty when decided).
std::string OpMismatchUndecidedText(const Finding& f, const DivergenceFacts& d);
// "seq 12, 24 and 36"
std::string SeqListText(const std::vector<uint64_t>& seqs);
// RANK_LOST where the lost ranks made the waited call before with the others
// (StallFacts::same_call_before): the two readings (failed on the way, or left it out), and
// DistributedDataParallel's unused-parameter case where the call is an all-reduce.
std::string LeftOutOrFailedText(const Finding& f, const StallFacts& s);
// " Their call paths part inside `ScheduleGPipe._step_microbatches` (schedules.py): ..."
// where two sides' calls came from different code of a library ("" otherwise), and what
// torch.distributed.pipelining's stage set-up there means.
std::string LibraryPartingText(const Finding& f);
// " Rank 0's calls with rank 1 repeat every 8 (4 sends, 4 receives), after 4 calls of
// set-up; this send is send 4 of 4 in repetition 3 (in a pipeline schedule: microbatch 4
// of 4 in its stage's step 3)." ("" where the sender's exchange has no rhythm). A sender in
// a schedule of several stages a rank (its call path in `f`) crosses each microbatch more
// than once a step: only a step's first send is named by its microbatch.
std::string SendPlaceText(const Finding& f, const P2pFacts& p);

// One kind's words: the headline is the kind, `joint`, then the brief (finding_text.cc).
struct FindingWords {
  const char* joint = ": ";
  std::string brief;
  std::string summary;
  std::vector<std::string> labels;  // by rank class
};

// WAIT_CYCLE and ORDER_INVERSION (cycle_words.cc).
FindingWords WaitCycleWords(const Finding& f, const CycleFacts& c);
FindingWords OrderInversionWords(const Finding& f, const CycleFacts& c);

}  // namespace collwatch::analyzer

#endif  // COLLWATCH_ANALYZER_FINDING_WORDS_H_
