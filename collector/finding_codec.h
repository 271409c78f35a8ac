// A finding to and from its wire form (proto Finding): the collector serves findings
// this way (Watch, `collwatch run --collector`), the dashboard and `run` read them back
// into analyzer::Finding so that report.cc words them once for every screen.
// Threading: pure functions.
#ifndef COLLWATCH_STORE_FINDING_CODEC_H_
#define COLLWATCH_STORE_FINDING_CODEC_H_

#include "analyzer/finding.h"
#include "proto/collwatch.pb.h"

namespace collwatch {

// Text the wire cannot carry (bytes that are not UTF-8) is made safe (WireText).
void FindingToProto(const analyzer::Finding& finding, v1::Finding* out);
void RefusedStreamToProto(const analyzer::RefusedStream& stream, v1::RefusedStream* out);
analyzer::RefusedStream RefusedStreamFromProto(const v1::RefusedStream& stream);
analyzer::Finding FindingFromProto(const v1::Finding& finding);
// A finding's stacks (and the job's, in ClusterState.stacks).
void FindingStacksToProto(const analyzer::FindingStacks& stacks, v1::FindingStacks* out);
analyzer::FindingStacks FindingStacksFromProto(const v1::FindingStacks& stacks);

}  // namespace collwatch

#endif  // COLLWATCH_STORE_FINDING_CODEC_H_
