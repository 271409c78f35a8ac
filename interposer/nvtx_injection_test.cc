// End-to-end tests of the NVTX injection: this program uses NVTX like any application
// (its own NVTX instance, from the headers) and never calls our callbacks itself; NVTX
// finds the injection through its load sequence and the ranges reach the region stack.
// Built twice (regions.cmake): with NVTX_INJECTION64_PATH, and preinjected.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <nvtx3/nvToolsExt.h>
#include <stdlib.h>

#include <nvtx3/nvtx3.hpp>
#include <string>
#include <thread>

#include "interposer/regions.h"
#include "ring/ring_format.h"

namespace collwatch {
namespace {

// Runs before main, hence before this process's first NVTX call (NVTX initialises
// lazily, on that call). The library is already mapped (we link it), so NVTX's dlopen
// of the path returns that copy, just as with LD_PRELOAD.
const bool kEnvironmentSet = [] {
#if defined(COLLWATCH_TEST_PREINJECT)
  unsetenv("NVTX_INJECTION64_PATH");
#else
  setenv("NVTX_INJECTION64_PATH", COLLWATCH_TEST_INJECTION_LIBRARY, 1);
#endif
  return true;
}();

std::string Current() {
  char buffer[ring::kMaxStringBytes + 1];
  const size_t length = RegionName(CurrentRegionId(), buffer, sizeof(buffer));
  return std::string(buffer, length < ring::kMaxStringBytes ? length : ring::kMaxStringBytes);
}

nvtxEventAttributes_t Attributes() {
  nvtxEventAttributes_t attributes{};
  attributes.version = NVTX_VERSION;
  attributes.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
  return attributes;
}

nvtxEventAttributes_t Ascii(const char* message) {
  nvtxEventAttributes_t attributes = Attributes();
  attributes.messageType = NVTX_MESSAGE_TYPE_ASCII;
  attributes.message.ascii = message;
  return attributes;
}

nvtxEventAttributes_t Wide(const wchar_t* message) {
  nvtxEventAttributes_t attributes = Attributes();
  attributes.messageType = NVTX_MESSAGE_TYPE_UNICODE;
  attributes.message.unicode = message;
  return attributes;
}

nvtxEventAttributes_t Registered(nvtxStringHandle_t handle) {
  nvtxEventAttributes_t attributes = Attributes();
  attributes.messageType = NVTX_MESSAGE_TYPE_REGISTERED;
  attributes.message.registered = handle;
  return attributes;
}

TEST(NvtxInjection, NestedPlainRanges) {
  ASSERT_TRUE(kEnvironmentSet);
  EXPECT_EQ(CurrentRegionId(), 0u);
  EXPECT_EQ(nvtxRangePushA("train_step"), 0);  // the 0-based level
  EXPECT_EQ(Current(), "train_step");
  EXPECT_EQ(nvtxRangePushW(L"forward \u00e9\u20ac"), 1);
  EXPECT_EQ(Current(), "forward \xc3\xa9\xe2\x82\xac");
  const nvtxEventAttributes_t ascii = Ascii("vision_tower");
  EXPECT_EQ(nvtxRangePushEx(&ascii), 2);
  EXPECT_EQ(Current(), "vision_tower");
  const nvtxEventAttributes_t wide = Wide(L"all_gather");
  EXPECT_EQ(nvtxRangePushEx(&wide), 3);
  EXPECT_EQ(Current(), "all_gather");
  EXPECT_EQ(RegionDepth(), 4u);

  EXPECT_EQ(nvtxRangePop(), 3);  // the level of the range ended
  EXPECT_EQ(Current(), "vision_tower");
  EXPECT_EQ(nvtxRangePop(), 2);
  EXPECT_EQ(Current(), "forward \xc3\xa9\xe2\x82\xac");
  EXPECT_EQ(nvtxRangePop(), 1);
  EXPECT_EQ(Current(), "train_step");
  EXPECT_EQ(nvtxRangePop(), 0);
  EXPECT_EQ(CurrentRegionId(), 0u);
}

TEST(NvtxInjection, SameNameThroughEveryApiIsOneRegion) {
  nvtxRangePushA("backward");
  const uint32_t id = CurrentRegionId();
  ASSERT_NE(id, 0u);
  nvtxRangePop();
  nvtxRangePushW(L"backward");
  EXPECT_EQ(CurrentRegionId(), id);
  nvtxRangePop();
  const nvtxEventAttributes_t ascii = Ascii("backward");
  nvtxRangePushEx(&ascii);
  EXPECT_EQ(CurrentRegionId(), id);
  nvtxDomainRangePushEx(nullptr, &ascii);  // the default domain: no prefix either
  EXPECT_EQ(CurrentRegionId(), id);
  nvtxDomainRangePop(nullptr);
  nvtxRangePop();
  EXPECT_EQ(InternRegion("backward", 8), id);
}

TEST(NvtxInjection, DomainRangesArePrefixed) {
  nvtxDomainHandle_t trainer = nvtxDomainCreateA("trainer");
  ASSERT_NE(trainer, nullptr);
  EXPECT_EQ(nvtxDomainCreateA("trainer"), trainer);  // one record per name
  nvtxDomainHandle_t wide = nvtxDomainCreateW(L"trainer");
  nvtxDomainHandle_t data = nvtxDomainCreateA("data");

  nvtxRangePushA("outer");
  const nvtxEventAttributes_t step = Ascii("step");
  EXPECT_EQ(nvtxDomainRangePushEx(trainer, &step), 1);
  EXPECT_EQ(Current(), "trainer:step");
  const uint32_t trainer_step = CurrentRegionId();
  EXPECT_EQ(nvtxDomainRangePushEx(wide, &step), 2);  // same name, wide API: same region
  EXPECT_EQ(CurrentRegionId(), trainer_step);
  EXPECT_EQ(nvtxDomainRangePushEx(data, &step), 3);
  EXPECT_EQ(Current(), "data:step");
  EXPECT_NE(CurrentRegionId(), trainer_step);
  const nvtxEventAttributes_t wide_step = Wide(L"load \u00fc");
  nvtxDomainRangePushEx(data, &wide_step);
  EXPECT_EQ(Current(), "data:load \xc3\xbc");

  nvtxDomainRangePop(data);
  nvtxDomainRangePop(data);
  EXPECT_EQ(CurrentRegionId(), trainer_step);
  nvtxDomainRangePop(wide);
  nvtxDomainRangePop(trainer);
  EXPECT_EQ(Current(), "outer");
  nvtxRangePop();
  nvtxDomainDestroy(data);  // left a no-op: handles stay valid
  EXPECT_EQ(CurrentRegionId(), 0u);
}

// NCCL's own ranges (pushed inside its calls, some popped on another thread during
// communicator init) never become or disturb the user's region.
TEST(NvtxInjection, NcclDomainRangesAreIgnored) {
  nvtxDomainHandle_t nccl = nvtxDomainCreateA("NCCL");
  nvtxRangePushA("user/step");
  const uint32_t user = CurrentRegionId();
  nvtxEventAttributes_t attributes{};
  attributes.version = NVTX_VERSION;
  attributes.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
  attributes.messageType = NVTX_MESSAGE_TYPE_ASCII;
  attributes.message.ascii = "ncclCommInitRank";
  nvtxDomainRangePushEx(nccl, &attributes);
  EXPECT_EQ(CurrentRegionId(), user);
  nvtxRangePop();  // the user's pop, while NCCL's range is still "open" elsewhere
  EXPECT_EQ(CurrentRegionId(), 0u);
  nvtxDomainRangePop(nccl);
  EXPECT_EQ(CurrentRegionId(), 0u);
}

TEST(NvtxInjection, RegisteredStrings) {
  nvtxDomainHandle_t nccl_like = nvtxDomainCreateA("NCCL_like");
  nvtxStringHandle_t in_domain = nvtxDomainRegisterStringA(nccl_like, "ncclAllReduce");
  nvtxStringHandle_t wide = nvtxDomainRegisterStringW(nccl_like, L"ncclBroadcast");
  nvtxStringHandle_t plain = nvtxDomainRegisterStringA(nullptr, "optimizer");
  ASSERT_NE(in_domain, nullptr);
  ASSERT_NE(wide, nullptr);
  ASSERT_NE(plain, nullptr);

  const nvtxEventAttributes_t first = Registered(plain);
  nvtxDomainRangePushEx(nullptr, &first);
  EXPECT_EQ(Current(), "optimizer");
  EXPECT_EQ(CurrentRegionId(), InternRegion("optimizer", 9));
  const nvtxEventAttributes_t second = Registered(in_domain);
  nvtxDomainRangePushEx(nccl_like, &second);
  EXPECT_EQ(Current(), "NCCL_like:ncclAllReduce");
  const nvtxEventAttributes_t third = Registered(wide);
  nvtxDomainRangePushEx(nccl_like, &third);
  EXPECT_EQ(Current(), "NCCL_like:ncclBroadcast");
  // The same text pushed as a plain message in that domain: the same region.
  const nvtxEventAttributes_t ascii = Ascii("ncclAllReduce");
  nvtxDomainRangePushEx(nccl_like, &ascii);
  EXPECT_EQ(Current(), "NCCL_like:ncclAllReduce");
  for (int i = 0; i < 4; ++i) nvtxDomainRangePop(nccl_like);
  EXPECT_EQ(CurrentRegionId(), 0u);
}

// The C++ API, as NCCL and many libraries use it: a named domain, registered strings
// and scoped ranges.
struct cpp_domain {
  static constexpr char const* name{"cpp_domain"};
};
struct cpp_message {
  static constexpr char const* message{"scoped_work"};
};

TEST(NvtxInjection, CppScopedRanges) {
  {
    nvtx3::scoped_range outer{"cpp_outer"};
    EXPECT_EQ(Current(), "cpp_outer");
    {
      auto const& message = nvtx3::registered_string_in<cpp_domain>::get<cpp_message>();
      nvtx3::scoped_range_in<cpp_domain> inner{message};
      EXPECT_EQ(Current(), "cpp_domain:scoped_work");
    }
    EXPECT_EQ(Current(), "cpp_outer");
  }
  EXPECT_EQ(CurrentRegionId(), 0u);
}

TEST(NvtxInjection, OddInputNeverCrashes) {
  EXPECT_EQ(nvtxRangePop(), -1);  // pop without push
  EXPECT_EQ(nvtxDomainRangePop(nullptr), -1);
  EXPECT_EQ(CurrentRegionId(), 0u);

  nvtxRangePushA(nullptr);  // unnamed range: pushed (keeps pops balanced), id 0
  EXPECT_EQ(RegionDepth(), 1u);
  EXPECT_EQ(CurrentRegionId(), 0u);
  nvtxRangePushW(nullptr);
  nvtxRangePushEx(nullptr);
  nvtxDomainRangePushEx(nullptr, nullptr);
  nvtxEventAttributes_t no_message = Attributes();
  nvtxRangePushEx(&no_message);
  EXPECT_EQ(CurrentRegionId(), 0u);
  nvtxEventAttributes_t too_small = Ascii("too_small");
  too_small.size = 8;  // an attribute struct that ends before the message
  nvtxRangePushEx(&too_small);
  EXPECT_EQ(CurrentRegionId(), 0u);
  nvtxEventAttributes_t odd_type = Ascii("odd_type");
  odd_type.messageType = 77;
  nvtxRangePushEx(&odd_type);
  EXPECT_EQ(CurrentRegionId(), 0u);
  const nvtxEventAttributes_t bogus = Registered(reinterpret_cast<nvtxStringHandle_t>(0xdead0000));
  nvtxRangePushEx(&bogus);  // not a handle we issued: no name
  EXPECT_EQ(CurrentRegionId(), 0u);
  const nvtxEventAttributes_t null_handle = Registered(nullptr);
  nvtxRangePushEx(&null_handle);
  // A domain handle we did not issue counts as the default domain.
  const nvtxEventAttributes_t foreign = Ascii("foreign_domain");
  nvtxDomainRangePushEx(reinterpret_cast<nvtxDomainHandle_t>(&no_message), &foreign);
  EXPECT_EQ(Current(), "foreign_domain");
  nvtxRangePushA("");
  EXPECT_NE(CurrentRegionId(), 0u);
  EXPECT_EQ(Current(), "");
  EXPECT_EQ(RegionDepth(), 11u);
  for (int i = 0; i < 11; ++i) nvtxRangePop();
  EXPECT_EQ(RegionDepth(), 0u);

  EXPECT_EQ(nvtxDomainCreateA(nullptr), nullptr);
  EXPECT_EQ(nvtxDomainCreateA(""), nullptr);
  EXPECT_EQ(nvtxDomainCreateW(nullptr), nullptr);
  EXPECT_EQ(nvtxDomainRegisterStringA(nullptr, nullptr), nullptr);
  EXPECT_EQ(nvtxDomainRegisterStringW(nullptr, nullptr), nullptr);

  // Calls we leave alone are NVTX's no-ops.
  nvtxMarkA("mark");
  nvtxRangeEnd(nvtxRangeStartA("start_end"));
  EXPECT_EQ(CurrentRegionId(), 0u);
}

TEST(NvtxInjection, LongNamesStayDistinct) {
  const std::string stem(300, 'n');
  const std::wstring wide_stem(600, L'w');  // past the wide conversion buffer
  nvtxRangePushA((stem + "1").c_str());
  const uint32_t a = CurrentRegionId();
  nvtxRangePushA((stem + "2").c_str());
  const uint32_t b = CurrentRegionId();
  nvtxRangePushW((wide_stem + L"1").c_str());
  const uint32_t c = CurrentRegionId();
  nvtxRangePushW((wide_stem + L"2").c_str());
  const uint32_t d = CurrentRegionId();
  nvtxDomainHandle_t domain = nvtxDomainCreateA(std::string(100, 'D').c_str());
  const std::string long_message = stem + "3";
  const nvtxEventAttributes_t in_domain = Ascii(long_message.c_str());
  nvtxDomainRangePushEx(domain, &in_domain);
  const uint32_t e = CurrentRegionId();
  EXPECT_EQ(Current(), std::string(47, 'D') + ":" + stem.substr(0, ring::kMaxStringBytes - 48));
  for (uint32_t id : {a, b, c, d, e}) EXPECT_NE(id, 0u);
  EXPECT_NE(a, b);
  EXPECT_NE(c, d);
  EXPECT_NE(a, e);
  EXPECT_EQ(Current().size(), ring::kMaxStringBytes);
  for (int i = 0; i < 5; ++i) nvtxRangePop();
}

TEST(NvtxInjection, EachThreadHasItsOwnRegion) {
  nvtxRangePushA("main_thread");
  std::string seen_before;
  std::string seen_inside;
  std::thread([&] {
    seen_before = Current();
    nvtxRangePushA("worker");
    seen_inside = Current();
    nvtxRangePop();
  }).join();
  EXPECT_EQ(seen_before, "");
  EXPECT_EQ(seen_inside, "worker");
  EXPECT_EQ(Current(), "main_thread");
  nvtxRangePop();
}

TEST(NvtxInjection, ProductionLibraryExportsOnlyTheEntryPoints) {
  // The object library as linked into libcollwatch.so: hidden by default.
  void* library = dlopen(COLLWATCH_TEST_EXPORTS_LIBRARY, RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(library, nullptr) << dlerror();
  EXPECT_NE(dlsym(library, "InitializeInjectionNvtx2"), nullptr);
  EXPECT_NE(dlsym(library, "InitializeInjectionNvtx2Preinject"), nullptr);
  EXPECT_EQ(dlsym(library, "_ZN9collwatch12InternRegionEPKcm"), nullptr);
  EXPECT_EQ(dlsym(library, "_ZN9collwatch15CurrentRegionIdEv"), nullptr);
  dlclose(library);
}

}  // namespace
}  // namespace collwatch
