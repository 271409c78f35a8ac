// A communicator's view for the dashboard: its ranks' rows from the cluster state and the
// findings, grouped by health and progress; rank lists as the user types them.
// Threading: pure functions.
#include <map>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "analyzer/process_ranks.h"
#include "dashboard/dashboard_model.h"
#include "dashboard/dashboard_model_internal.h"
#include "store/event_codec.h"

namespace collwatch::dashboard {

using internal::Contains;
using internal::FindingHealth;
using internal::IsDivergence;
using internal::kNsPerS;
using internal::kSlowAfterS;
using internal::Seconds;

int MinorityClass(const v1::Finding& finding) {
  if (!IsDivergence(finding.kind()) || finding.rank_classes_size() < 2) return -1;
  int smallest = 0;
  bool alone = true;
  for (int i = 1; i < finding.rank_classes_size(); ++i) {
    const int size = finding.rank_classes(i).ranks_size();
    const int least = finding.rank_classes(smallest).ranks_size();
    if (size < least) {
      smallest = i;
      alone = true;
    } else if (size == least) {
      alone = false;
    }
  }
  return alone ? smallest : -1;
}

CommView BuildCommView(const v1::ClusterState& state, const v1::CommState& comm,
                       const std::optional<std::vector<int32_t>>& rank_filter) {
  CommView view;
  view.comm_id = comm.comm_id();
  view.nranks = comm.nranks();
  view.reporting = comm.ranks_size();
  view.collectives_per_second = comm.collectives_per_second();
  view.inflight_seq = comm.oldest_inflight_seq();
  view.inflight_op = comm.oldest_inflight_op();
  view.inflight_age_s = comm.oldest_inflight_age_s();
  view.inflight_expected_s = comm.oldest_inflight_expected_s();
  view.stall_threshold_s = comm.stall_threshold_s();
  view.waiting_for_ranks = comm.waiting_for_ranks();
  for (const v1::RankProgress& rank : comm.ranks()) view.max_entered = std::max(view.max_entered, rank.entered_seq());

  // The latest finding about this communicator explains its ranks.
  const v1::Finding* finding = nullptr;
  for (const v1::Finding& candidate : state.findings()) {
    if (candidate.comm_id() == comm.comm_id()) finding = &candidate;
  }

  std::map<int32_t, const v1::RankProgress*> reported;
  for (const v1::RankProgress& rank : comm.ranks()) reported[rank.rank()] = &rank;
  const int32_t nranks = std::max<int32_t>(comm.nranks(), reported.empty() ? 0 : reported.rbegin()->first + 1);
  const uint64_t seq = view.inflight_seq;
  const double age = view.inflight_age_s;
  const double slow_after = std::max(kSlowAfterS, view.inflight_expected_s);
  const bool stalled = seq != 0 && view.stall_threshold_s > 0 && age >= view.stall_threshold_s;
  const int minority = finding != nullptr ? MinorityClass(*finding) : -1;
  for (int32_t number = 0; number < nranks; ++number) {
    if (rank_filter && !std::binary_search(rank_filter->begin(), rank_filter->end(), number)) continue;
    RankRow row;
    row.ranks = {number};
    auto found = reported.find(number);
    const v1::RankProgress* rank = found == reported.end() ? nullptr : found->second;
    if (rank != nullptr) {
      row.entered_seq = rank->entered_seq();
      row.completed_seq = rank->completed_seq();
    }
    const v1::WriterStatus status = rank != nullptr ? rank->status() : v1::WRITER_STATUS_UNSPECIFIED;
    if (finding != nullptr) {
      row.health = FindingHealth(finding->kind());
      if (IsDivergence(finding->kind())) {
        row.note = "diverged";
        for (int i = 0; i < finding->rank_classes_size(); ++i) {
          const v1::RankClass& rank_class = finding->rank_classes(i);
          if (!Contains(rank_class.ranks(), number)) continue;
          row.minority = i == minority;
          row.note = absl::StrFormat("class %d/%d%s at seq %d: %s", i + 1, finding->rank_classes_size(),
                                     row.minority ? " (minority)" : "", finding->seq(), rank_class.label());
        }
      } else if (Contains(finding->lagging_ranks(), number)) {
        row.note = finding->kind() == v1::RANK_LOST          ? "lost"
                   : finding->kind() == v1::RANK_NOT_RUNNING ? absl::StrFormat("in seq %d, process not running", finding->seq())
                                                             : absl::StrFormat("not at seq %d", finding->seq());
      } else if (finding->kind() == v1::WAIT_CYCLE) {
        row.note = absl::StrFormat("in a wait cycle at seq %d (the finding names the ranks)", finding->seq());
      } else if (finding->kind() == v1::ORDER_INVERSION) {
        // A latent deadlock the ranks got through: worth a look (yellow), not stuck.
        row.health = Health::kSlow;
        row.note = absl::StrFormat("seq %d issued in another order than on a rank sharing it (latent)", finding->seq());
      } else {
        row.health = Health::kSlow;
        row.note = finding->kind() == v1::TRANSPORT_STALL ? absl::StrFormat("in seq %d, not completing", finding->seq())
                                                          : absl::StrFormat("waiting at seq %d", finding->seq());
        if (finding->kind() == v1::TRANSPORT_STALL) row.health = Health::kStuck;
      }
    } else if (rank == nullptr) {
      row.health = seq != 0 && age >= slow_after ? (stalled ? Health::kStuck : Health::kSlow) : Health::kIdle;
      row.note = "not reported on this communicator";
    } else if (WireStatusLostWithoutExit(status)) {
      row.health = Health::kStuck;
      row.note = status == v1::WRITER_STATUS_DEAD ? "process died" : "process silent";
    } else if (status == v1::WRITER_STATUS_EXITED) {
      row.health = Health::kIdle;
      row.note = "exited";
    } else if (seq != 0 && row.entered_seq < seq) {
      row.health = stalled ? Health::kStuck : (age >= slow_after ? Health::kSlow : Health::kHealthy);
      row.note = row.health == Health::kHealthy ? absl::StrFormat("before seq %d", seq)
                                                : absl::StrFormat("not at seq %d for %s", seq, Seconds(age));
    } else if (seq != 0 && row.completed_seq < seq) {
      row.health = stalled && !view.waiting_for_ranks ? Health::kStuck : Health::kHealthy;
      row.note = view.waiting_for_ranks ? absl::StrFormat("waiting at seq %d", seq) : absl::StrFormat("in seq %d", seq);
    } else {
      row.health = Health::kHealthy;
      row.note = "running";
    }
    view.health = std::max(view.health, row.health);
    view.rows.push_back(std::move(row));
  }
  return view;
}

std::vector<RankRow> GroupRows(const std::vector<RankRow>& rows) {
  std::map<std::tuple<int, bool, uint64_t, uint64_t, std::string>, RankRow> groups;
  for (const RankRow& row : rows) {
    // Worst health first, a divergence's minority before the others, then the least progress.
    auto key = std::make_tuple(-static_cast<int>(row.health), !row.minority, row.entered_seq, row.completed_seq, row.note);
    auto [group, inserted] = groups.try_emplace(key, row);
    if (!inserted) group->second.ranks.insert(group->second.ranks.end(), row.ranks.begin(), row.ranks.end());
  }
  std::vector<RankRow> grouped;
  for (auto& [key, group] : groups) grouped.push_back(std::move(group));
  return grouped;
}

}  // namespace collwatch::dashboard
