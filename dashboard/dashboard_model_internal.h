// What the dashboard model's files share: finding kinds by health, rank lookups, times
// as shown. Threading: pure functions.
#ifndef COLLWATCH_DASHBOARD_DASHBOARD_MODEL_INTERNAL_H_
#define COLLWATCH_DASHBOARD_DASHBOARD_MODEL_INTERNAL_H_

#include <algorithm>
#include <string>

#include "absl/strings/str_format.h"
#include "dashboard/dashboard_model.h"

namespace collwatch::dashboard::internal {

inline constexpr double kNsPerS = 1e9;
// A late rank is slow once it is this far behind the first arrival, whatever the
// expected time says (early in a job nothing has been learned yet).
inline constexpr double kSlowAfterS = 1.0;

inline bool IsDivergence(v1::FindingKind kind) {
  return kind == v1::PATH_DIVERGENCE || kind == v1::SKIPPED_REDUCE_SCATTER || kind == v1::SIGNATURE_MISMATCH ||
         kind == v1::OP_MISMATCH;
}

inline Health FindingHealth(v1::FindingKind kind) { return IsDivergence(kind) ? Health::kDiverged : Health::kStuck; }

inline bool Contains(const google::protobuf::RepeatedField<int32_t>& ranks, int32_t rank) {
  return std::find(ranks.begin(), ranks.end(), rank) != ranks.end();
}

inline std::string Seconds(double s) {
  if (s < 10) return absl::StrFormat("%.2f s", s);
  if (s < 600) return absl::StrFormat("%.1f s", s);
  return absl::StrFormat("%.0f min", s / 60);
}

}  // namespace collwatch::dashboard::internal

#endif  // COLLWATCH_DASHBOARD_DASHBOARD_MODEL_INTERNAL_H_
