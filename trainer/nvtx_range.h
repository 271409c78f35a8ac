// A scoped NVTX v3 range: collwatch (an NVTX injection library) names every collective
// by the innermost range of the calling thread, so each unit's collectives sit inside
// one of these. Header-only; a range belongs to the thread that opened it.
#ifndef COLLWATCH_TRAINER_NVTX_RANGE_H_
#define COLLWATCH_TRAINER_NVTX_RANGE_H_

#include <nvtx3/nvToolsExt.h>

#include <string>

namespace collwatch::trainer {

class NvtxRange {
 public:
  explicit NvtxRange(const std::string& name) { nvtxRangePushA(name.c_str()); }
  ~NvtxRange() { nvtxRangePop(); }
  NvtxRange(const NvtxRange&) = delete;
  NvtxRange& operator=(const NvtxRange&) = delete;
};

}  // namespace collwatch::trainer

#endif  // COLLWATCH_TRAINER_NVTX_RANGE_H_
