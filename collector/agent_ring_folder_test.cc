// The agent's ring folder rule over a real collector (docs/security.md): it ships rings
// only from a folder private to its user, never from one open to others or reached
// through a symlink. Threading: single-threaded test code; the agent and the server run
// their own threads.
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
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

}  // namespace
}  // namespace collwatch::agent_ring_folder_test
