// The agent's ring folder rule over a real collector (docs/security.md): it ships rings
// only from a folder private to its user, never from one open to others or reached
// through a symlink; and it scans that folder one scan at a time, from its tail thread and
// from Drain. Threading: single-threaded test code; the agent and the server run their own
// threads.
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <memory>
#include <string>
#include <thread>

#include "agent/agent.h"
#include "collector/collector_service.h"
#include "collector/security_test_support.h"
#include "gtest/gtest.h"
#include "interposer/ring_writer.h"
#include "store/trace_store.h"
#include "tests/support/test_time.h"

namespace collwatch::agent_ring_folder_test {
namespace {

// The agent ships rings only from a folder private to its user: one opened to others
// (0755), or a symlink to a private one, is skipped; the same rings are shipped once the
// folder is private again.
TEST(AgentRingFolderTest, ShipsOnlyFromAPrivateFolder) {
  ScratchDir dir;
  const std::string rings = dir.path() + "/rings";
  Config config;
  std::snprintf(config.ring_dir, sizeof config.ring_dir, "%s", rings.c_str());
  std::snprintf(config.job, sizeof config.job, "agentjob");
  config.ring_records = 64;
  std::unique_ptr<RingWriter> writer = RingWriter::Create(config);
  ASSERT_NE(writer, nullptr);
  ring::Record record{};
  record.kind = static_cast<uint16_t>(ring::RecordKind::kEnter);
  record.fn = static_cast<uint16_t>(ring::ApiFn::kAllReduce);
  record.comm_id = 7;
  record.seq = 1;
  writer->Append(RingWriter::kSharedLane, record);
  ASSERT_EQ(chmod(rings.c_str(), 0755), 0);
  const std::string link = dir.path() + "/rings-link";
  ASSERT_EQ(symlink(rings.c_str(), link.c_str()), 0);

  CollectorOptions collector_options = QuietOptions(dir.path() + "/out");
  collector_options.listen = "127.0.0.1:0";
  auto server = CollectorServer::Start(collector_options);
  ASSERT_TRUE(server.ok()) << server.status();
  auto start_agent = [&](const std::string& ring_dir) {
    AgentOptions options;
    options.collector = (*server)->address();
    options.ring_dir = ring_dir;
    options.job = "agentjob";
    options.log = false;
    return Agent::Start(options);
  };
  // Open to others: nothing shipped over five rescans.
  auto open_folder = start_agent(rings);
  ASSERT_TRUE(open_folder.ok());
  std::this_thread::sleep_for(std::chrono::seconds(1));
  EXPECT_EQ((*open_folder)->Stats().rings, 0);
  EXPECT_TRUE(ListRankTraces(collector_options.out_dir, "agentjob").empty());

  // Private again: shipped from the folder itself, never through the symlink to it.
  ASSERT_EQ(chmod(rings.c_str(), 0700), 0);
  auto through_link = start_agent(link);
  ASSERT_TRUE(through_link.ok());
  bool shipped = false;
  for (int i = 0; i < testing::Scaled(1000) && !shipped; ++i) {  // 20 s of the default build
    shipped = !ListRankTraces(collector_options.out_dir, "agentjob").empty();
    if (!shipped) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_TRUE(shipped) << "the agent did not ship from the private folder";
  EXPECT_EQ((*open_folder)->Stats().rings, 1);
  std::this_thread::sleep_for(std::chrono::seconds(1));
  EXPECT_EQ((*through_link)->Stats().rings, 0) << "a symlinked folder was followed";
  (*open_folder)->Stop();
  (*through_link)->Stop();
  (*server)->Shutdown();
}

// `collwatch run` drains its agent from its own thread (Agent::Drain) while the agent's
// tail thread scans the folder: one scan at a time. Before, both scanned together, and a
// ring that cannot be read yet, noted by both, was a data race (TSan, in a clean-clone
// run: `collwatch run` exited 66); two scans could also open one new ring twice and
// replace the channel the tail thread was polling. Under TSan this test fails on that code.
TEST(AgentRingFolderTest, DrainScansBesideTheTailThreadOneScanAtATime) {
  ScratchDir dir;
  const std::string rings = dir.path() + "/rings";
  ASSERT_EQ(mkdir(rings.c_str(), 0700), 0);
  std::ofstream(rings + "/not-a-ring-yet.ring") << "neither a header nor records";
  AgentOptions options;
  options.collector = "127.0.0.1:1";  // never reached: nothing here is shipped
  options.ring_dir = rings;
  options.log = false;
  options.poll_interval_s = 0.001;
  options.rescan_interval_s = 0;  // the tail thread scans at every poll
  auto agent = Agent::Start(options);
  ASSERT_TRUE(agent.ok()) << agent.status();
  // With no ring to wait for, each Drain is one scan from this thread.
  for (int i = 0; i < 200; ++i) EXPECT_TRUE((*agent)->Drain(1)) << "drain " << i;
  EXPECT_EQ((*agent)->Stats().rings, 0);
  (*agent)->Stop();
}

}  // namespace
}  // namespace collwatch::agent_ring_folder_test
