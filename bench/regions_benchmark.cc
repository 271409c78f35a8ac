// Cost of NVTX push+pop with and without the collwatch injection, and of the region
// core (intern + stack) called directly. Threading: single-threaded benchmarks.
// `--inject` sets NVTX_INJECTION64_PATH to the injection library before the first NVTX
// call; without it NVTX finds no tool and each call is a no-op.
#include <benchmark/benchmark.h>
#include <nvtx3/nvToolsExt.h>
#include <stdlib.h>

#include <cstring>
#include <string>

#include "interposer/regions.h"

namespace {

const char* Label() {
  return getenv("NVTX_INJECTION64_PATH") != nullptr ? "injected" : "no tool";
}

void BM_NvtxPushPopA(benchmark::State& state) {
  for (auto _ : state) {
    nvtxRangePushA("forward");
    nvtxRangePop();
  }
  state.SetLabel(Label());
}
BENCHMARK(BM_NvtxPushPopA);

void BM_NvtxPushPopLongA(benchmark::State& state) {
  const std::string name = "model.layers.23.self_attn.qkv_proj/forward/all_gather_params";
  for (auto _ : state) {
    nvtxRangePushA(name.c_str());
    nvtxRangePop();
  }
  state.SetLabel(Label());
}
BENCHMARK(BM_NvtxPushPopLongA);

void BM_NvtxDomainPushPopRegistered(benchmark::State& state) {
  nvtxDomainHandle_t domain = nvtxDomainCreateA("bench");
  nvtxEventAttributes_t attributes{};
  attributes.version = NVTX_VERSION;
  attributes.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
  attributes.messageType = NVTX_MESSAGE_TYPE_REGISTERED;
  attributes.message.registered = nvtxDomainRegisterStringA(domain, "forward");
  for (auto _ : state) {
    nvtxDomainRangePushEx(domain, &attributes);
    nvtxDomainRangePop(domain);
  }
  state.SetLabel(Label());
}
BENCHMARK(BM_NvtxDomainPushPopRegistered);

void BM_NvtxDomainPushPopAscii(benchmark::State& state) {
  nvtxDomainHandle_t domain = nvtxDomainCreateA("bench");
  nvtxEventAttributes_t attributes{};
  attributes.version = NVTX_VERSION;
  attributes.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
  attributes.messageType = NVTX_MESSAGE_TYPE_ASCII;
  attributes.message.ascii = "forward";
  for (auto _ : state) {
    nvtxDomainRangePushEx(domain, &attributes);
    nvtxDomainRangePop(domain);
  }
  state.SetLabel(Label());
}
BENCHMARK(BM_NvtxDomainPushPopAscii);

// The core without NVTX (a statically linked copy): what a push costs us.
void BM_CoreInternPushPop(benchmark::State& state) {
  for (auto _ : state) {
    collwatch::PushRegion(collwatch::InternRegion("forward", 7));
    collwatch::PopRegion();
  }
}
BENCHMARK(BM_CoreInternPushPop);

void BM_CorePushPopCurrent(benchmark::State& state) {
  const uint32_t id = collwatch::InternRegion("forward", 7);
  for (auto _ : state) {
    collwatch::PushRegion(id);
    benchmark::DoNotOptimize(collwatch::CurrentRegionId());
    collwatch::PopRegion();
  }
}
BENCHMARK(BM_CorePushPopCurrent);

}  // namespace

int main(int argc, char** argv) {
  // Strip our flag before Google Benchmark sees the arguments.
  int kept = 1;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--inject") == 0) {
      setenv("NVTX_INJECTION64_PATH", COLLWATCH_INJECTION_LIBRARY, 1);
    } else {
      argv[kept++] = argv[i];
    }
  }
  argc = kept;
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
