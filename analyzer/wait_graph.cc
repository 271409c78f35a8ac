// A wait-for cycle as data: report.json's `wait_cycle` and the report folder's
// wait-for.dot (report.h).
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "analyzer/call_sites.h"
#include "analyzer/report.h"
#include "files/json_contract.h"
#include "ring/ring_names.h"

namespace collwatch::analyzer {
namespace {

nlohmann::json CallJson(const CallFacts& call, uint64_t comm_id) {
  const CallFrame* frame = InnermostUserFrame(call.call_path);
  return {{"comm", JsonId(comm_id)},
          {"seq", call.seq},
          {"op", std::string(OpName(call.fn))},
          {"count", call.count},
          {"peer", ring::IsP2p(call.fn) ? nlohmann::json(call.root_or_peer) : nlohmann::json(nullptr)},
          {"code", frame == nullptr ? "" : FrameText(*frame)}};
}

// DOT strings are double-quoted; names in them come from the job (regions, files).
std::string DotQuoted(const std::string& text) {
  std::string quoted = "\"";
  for (char c : text) {
    if (c == '\n') {
      quoted += "\\n";  // DOT's line break
      continue;
    }
    if (c == '"' || c == '\\') quoted += '\\';
    quoted += c;
  }
  return quoted + "\"";
}

std::string DotCallLabel(const CallFacts& call, uint64_t comm_id) {
  std::string label = absl::StrFormat("%s #%d on %s", OpName(call.fn), call.seq, CommText(comm_id));
  if (ring::IsP2p(call.fn)) absl::StrAppend(&label, " (peer ", call.root_or_peer, ")");
  if (const CallFrame* frame = InnermostUserFrame(call.call_path)) absl::StrAppend(&label, "\n", FrameText(*frame));
  return label;
}

}  // namespace

nlohmann::json WaitCycleJson(const Finding& finding) {
  const auto* facts = std::get_if<CycleFacts>(&finding.evidence);
  if (facts == nullptr) return nullptr;
  nlohmann::json arcs = nlohmann::json::array();
  for (const WaitArc& arc : facts->arcs) {
    arcs.push_back({{"rank", arc.rank},
                    {"comm_rank", arc.comm_rank},
                    {"waits_in", CallJson(arc.call, arc.comm_id)},
                    {"waits_for", arc.peer},
                    {"peer_entered", arc.peer_entered},
                    {"peer_held_in", arc.peer_call ? CallJson(*arc.peer_call, arc.peer_comm_id) : nlohmann::json(nullptr)}});
  }
  return {{"arcs", arcs}, {"point_to_point", facts->point_to_point}, {"waited_s", facts->waited_s}};
}

std::string WaitForGraphDot(const std::vector<Finding>& findings) {
  std::string dot;
  int cycle = 0;
  for (const Finding& finding : findings) {
    const auto* facts = std::get_if<CycleFacts>(&finding.evidence);
    if (facts == nullptr) continue;
    if (dot.empty()) dot = "// collwatch wait-for graph: render with `dot -Tsvg wait-for.dot -o wait-for.svg`\ndigraph wait_for {\n  rankdir=LR;\n";
    ++cycle;
    const bool latent = finding.kind == FindingKind::kOrderInversion;
    absl::StrAppend(&dot, "  subgraph cluster_", cycle, " {\n    label=", DotQuoted(finding.headline), ";\n");
    for (const WaitArc& arc : facts->arcs) {
      const std::string node = absl::StrCat("c", cycle, "_r", arc.rank);
      std::string process;
      if (arc.process) process = absl::StrFormat("\n%s pid %d", arc.process->host, arc.process->pid);
      absl::StrAppend(&dot, "    ", node, " [shape=box, label=", DotQuoted(absl::StrCat("rank ", arc.rank, process)),
                      "];\n");
      absl::StrAppend(&dot, "    ", node, " -> c", cycle, "_r", arc.peer, " [label=",
                      DotQuoted(absl::StrCat(latent ? "would wait in " : "waits in ", DotCallLabel(arc.call, arc.comm_id))),
                      latent ? ", style=dashed" : "", "];\n");
    }
    dot += "  }\n";
  }
  if (!dot.empty()) dot += "}\n";
  return dot;
}

}  // namespace collwatch::analyzer
