// Calls the NCCL queries that work without a GPU (GetUniqueId, GetVersion,
// GetErrorString) through whatever ncclX resolves to (the preload, when set), and again
// straight into libnccl.so.2, and checks that both agree. Prints the id's first bytes.
#include <dlfcn.h>
#include <nccl.h>

#include <cstdio>
#include <cstring>

int main() {
  void* real = dlopen("libnccl.so.2", RTLD_NOW | RTLD_NOLOAD);
  if (real == nullptr) {
    std::fprintf(stderr, "libnccl.so.2 is not loaded\n");
    return 2;
  }
  auto real_version = reinterpret_cast<decltype(&ncclGetVersion)>(dlsym(real, "ncclGetVersion"));
  auto real_error = reinterpret_cast<decltype(&ncclGetErrorString)>(dlsym(real, "ncclGetErrorString"));

  ncclUniqueId id{};
  if (ncclGetUniqueId(&id) != ncclSuccess) return 3;
  bool all_zero = true;
  for (char byte : id.internal) all_zero = all_zero && byte == 0;
  if (all_zero) return 4;

  int version = 0;
  int expected_version = 0;
  if (ncclGetVersion(&version) != ncclSuccess || real_version(&expected_version) != ncclSuccess ||
      version != expected_version) {
    return 5;
  }
  const char* text = ncclGetErrorString(ncclInvalidArgument);
  if (text != real_error(ncclInvalidArgument)) return 6;  // the very same string
  std::printf("version %d\nerror %s\n", version, text);
  return 0;
}
