// FoldReferences (fold_references.h): published by the job's model's thread, read by workers.
#include "analyzer/fold_references.h"

namespace collwatch::analyzer {

void FoldReferences::Publish(uint64_t comm_id, uint64_t window, Window published) {
  auto shared = std::make_shared<const Window>(std::move(published));
  const std::lock_guard<std::mutex> lock(mutex_);
  classes_[{comm_id, window}].push_back(std::move(shared));
}

void FoldReferences::PublishNames(const JobModel& model) {
  const size_t regions = model.region_names().size();
  const size_t call_paths = model.call_path_count();
  if (regions == regions_published_ && call_paths == call_paths_published_) return;  // the usual case
  const std::lock_guard<std::mutex> lock(mutex_);
  for (; regions_published_ < regions; ++regions_published_) {
    region_ids_.try_emplace(std::string(model.RegionName(static_cast<RegionId>(regions_published_))),
                            static_cast<RegionId>(regions_published_));
  }
  for (; call_paths_published_ < call_paths; ++call_paths_published_) {
    const auto id = static_cast<CallPathId>(call_paths_published_);
    call_path_ids_.try_emplace(CallPathKey(model.call_path(id)), id);
  }
}

FoldReferences::View FoldReferences::ViewOf(const std::vector<std::string>& region_names,
                                            const std::vector<CallPath>& call_paths,
                                            const std::vector<std::pair<uint64_t, uint64_t>>& wanted) const {
  View view;
  view.region_of.assign(region_names.size(), 0);
  view.call_path_of.assign(call_paths.size(), 0);
  std::vector<std::string> call_path_keys(call_paths.size());
  for (size_t i = 1; i < call_paths.size(); ++i) call_path_keys[i] = CallPathKey(call_paths[i]);
  const std::lock_guard<std::mutex> lock(mutex_);
  for (size_t i = 1; i < region_names.size(); ++i) {
    auto known = region_ids_.find(region_names[i]);
    view.region_of[i] = known == region_ids_.end() ? kNotInterned : known->second;
  }
  for (size_t i = 1; i < call_paths.size(); ++i) {
    auto known = call_path_ids_.find(call_path_keys[i]);
    view.call_path_of[i] = known == call_path_ids_.end() ? kNotInterned : known->second;
  }
  for (const auto& key : wanted) {
    if (auto classes = classes_.find(key); classes != classes_.end()) view.classes.emplace(key, classes->second);
  }
  return view;
}

}  // namespace collwatch::analyzer
