// A finding in words: its headline, brief, summary, rank-class labels and context lines,
// made from what detection recorded (finding.h: kind, ranks, positions, evidence), one
// function per kind. The analyzer calls WriteWords once per finding as it emits it;
// nothing else writes a finding's words, and every consumer reads them as fields.
// Threading: pure functions.
#ifndef COLLWATCH_ANALYZER_FINDING_TEXT_H_
#define COLLWATCH_ANALYZER_FINDING_TEXT_H_

#include "analyzer/finding.h"

namespace collwatch::analyzer {

// Fills `finding`'s headline, brief, summary, the labels of its rank classes and the
// lines of its context from its other fields. A finding without evidence is left as it is.
void WriteWords(Finding* finding);

}  // namespace collwatch::analyzer

#endif  // COLLWATCH_ANALYZER_FINDING_TEXT_H_
