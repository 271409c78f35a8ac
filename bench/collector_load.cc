// Load tool for the collector: N simulated ranks stream synthetic events over loopback
// into one in-process collector that stores them; prints events per second. Each
// simulated rank is one thread with one stream, keeping up to --window batches unacked.
// Usage: collwatch_collector_load [--streams N] [--seconds S] [--batch B] [--out DIR] [--analyze 0|1]
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "collector/collector_service.h"
#include "grpcpp/grpcpp.h"

namespace collwatch {
namespace {

struct LoadOptions {
  int streams = 16;
  double seconds = 5;
  int batch = 4096;
  int window = 4;
  std::string out = "/tmp/collwatch-load";
  bool analyze = true;  // the collector's online analysis (as `collwatch run` has it)
};

// A batch of one rank's calls as a CPU run ships them: each collective's enter, then its
// return (which is also its completion). Each simulated rank has a communicator of its
// own: unsynchronised threads on one communicator would drift millions of collectives
// apart, which no real job does.
v1::StreamEventsRequest MakeBatch(int batch, int stream_index) {
  v1::StreamEventsRequest request;
  for (int i = 0; i < batch; ++i) {
    v1::Event* event = request.add_events();
    const bool enter = i % 2 == 0;
    event->set_kind(enter ? v1::EVENT_KIND_ENTER : v1::EVENT_KIND_RETURN);
    event->set_fn(1);
    event->set_comm_id(0x9e3779b97f4a7c15ull + static_cast<uint64_t>(stream_index));
    event->set_rank(0);
    event->set_nranks(1);
    event->set_count(1 << 20);
    event->set_dtype(7);
    event->set_redop(0);
    event->set_root_or_peer(-1);
    event->set_stream(0x7f0000001000ull);
    event->set_t_ns(1'000'000'000ull);
    event->set_region_id(2);
    event->set_tid(4242);
    event->set_flags(enter ? 0 : 2);  // return: ring::kFlagCompletesAtReturn
    event->set_lane(1);
    event->set_ref_lane(1);
  }
  request.set_writer_status(v1::WRITER_STATUS_RUNNING);
  return request;
}

int Main(int argc, char** argv) {
  LoadOptions options;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--streams") options.streams = std::atoi(argv[i + 1]);
    else if (flag == "--seconds") options.seconds = std::atof(argv[i + 1]);
    else if (flag == "--batch") options.batch = std::atoi(argv[i + 1]);
    else if (flag == "--window") options.window = std::atoi(argv[i + 1]);
    else if (flag == "--out") options.out = argv[i + 1];
    else if (flag == "--analyze") options.analyze = std::atoi(argv[i + 1]) != 0;
    else {
      std::fprintf(stderr, "unknown flag %s\n", argv[i]);
      return 2;
    }
  }
  std::filesystem::remove_all(options.out);
  CollectorOptions collector;
  collector.listen = "127.0.0.1:0";
  collector.out_dir = options.out;
  collector.max_events_per_second = 1e12;
  collector.max_message_bytes = 64 << 20;
  collector.log = false;
  collector.analyze = options.analyze;
  auto server = CollectorServer::Start(collector);
  if (!server.ok()) {
    std::fprintf(stderr, "%s\n", server.status().ToString().c_str());
    return 1;
  }
  grpc::ChannelArguments arguments;
  arguments.SetMaxSendMessageSize(64 << 20);
  // A few channels (TCP connections) shared by the streams, as agents on a few nodes.
  std::vector<std::shared_ptr<grpc::Channel>> channels;
  for (int i = 0; i < 4; ++i) {
    arguments.SetInt("collwatch.channel", i);  // distinct channels, not one pooled connection
    channels.push_back(grpc::CreateCustomChannel((*server)->address(), grpc::InsecureChannelCredentials(), arguments));
  }
  std::atomic<bool> stop{false};
  std::atomic<int> opened{0};
  std::atomic<uint64_t> acked_events{0};
  std::atomic<int> failures{0};
  std::vector<std::thread> ranks;
  for (int stream_index = 0; stream_index < options.streams; ++stream_index) {
    ranks.emplace_back([&, stream_index] {
      auto stub = v1::Collector::NewStub(channels[static_cast<size_t>(stream_index) % channels.size()]);
      grpc::ClientContext context;
      auto stream = stub->StreamEvents(&context);
      v1::StreamEventsRequest hello;
      v1::RankIdentity* identity = hello.mutable_rank();
      identity->set_job("load");
      identity->set_host("sim");
      identity->set_pid(1000 + stream_index);
      identity->set_rank(stream_index);
      identity->set_lane_count(4);
      v1::StreamEventsResponse answer;
      if (!stream->Write(hello) || !stream->Read(&answer)) {
        ++failures;
        return;
      }
      ++opened;
      v1::StreamEventsRequest batch = MakeBatch(options.batch, stream_index);
      uint64_t index = 0;
      uint64_t sent = 0;
      uint64_t acked = 0;
      while (!stop.load(std::memory_order_relaxed)) {
        batch.set_batch_seq(++sent);
        for (v1::Event& event : *batch.mutable_events()) {
          const bool enter = event.kind() == v1::EVENT_KIND_ENTER;
          event.set_index(index);
          event.set_seq(index / 2 + 1);
          event.set_t_ns(1'000'000'000ull + index * 1000);
          if (!enter) event.set_ref_index(index - 1);
          ++index;
        }
        if (!stream->Write(batch)) break;
        while (sent - acked >= static_cast<uint64_t>(options.window)) {
          if (!stream->Read(&answer)) break;
          acked_events += (answer.acked_batch_seq() - acked) * static_cast<uint64_t>(options.batch);
          acked = answer.acked_batch_seq();
        }
      }
      stream->WritesDone();
      while (stream->Read(&answer)) {
        acked_events += (answer.acked_batch_seq() - acked) * static_cast<uint64_t>(options.batch);
        acked = answer.acked_batch_seq();
      }
      stream->Finish();
    });
  }
  // Measure over the steady part: after every stream opened.
  while (opened.load() + failures.load() < options.streams) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  const uint64_t start_events = acked_events.load();
  const auto start = std::chrono::steady_clock::now();
  int live_streams_max = 0;
  while (std::chrono::steady_clock::now() - start < std::chrono::duration<double>(options.seconds)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    live_streams_max = std::max(live_streams_max, server.value()->service().live_state().Summary().ranks_reporting);
  }
  const uint64_t events = acked_events.load() - start_events;
  const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  stop = true;
  for (std::thread& rank : ranks) rank.join();
  const LiveSummary summary = (*server)->service().live_state().Summary();
  uint64_t bytes = 0;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(options.out)) {
    if (entry.is_regular_file()) bytes += entry.file_size();
  }
  std::printf("streams=%d (opened %d, failed %d, concurrently reporting %d) batch=%d window=%d\n", options.streams,
              opened.load(), failures.load(), live_streams_max, options.batch, options.window);
  std::printf("acked events: %.3g in %.2f s = %.3g events/s; stored %llu events, %.1f bytes/event on disk\n",
              static_cast<double>(events), elapsed, static_cast<double>(events) / elapsed,
              static_cast<unsigned long long>(summary.events),
              summary.events > 0 ? static_cast<double>(bytes) / static_cast<double>(summary.events) : 0.0);
  if (options.analyze) {
    std::printf("online analysis: %llu events queued past its bound and not analysed\n",
                static_cast<unsigned long long>((*server)->service().online_analyzer().dropped_records()));
  }
  (*server)->Shutdown();
  std::filesystem::remove_all(options.out);
  return failures.load() == 0 ? 0 : 1;
}

}  // namespace
}  // namespace collwatch

int main(int argc, char** argv) { return collwatch::Main(argc, argv); }
