// Symbol lookup past our own library. Runs once per symbol (callers cache).
// Threading: any thread (see real_symbols.h).
#include "interposer/real_symbols.h"

#include <dlfcn.h>
#include <link.h>

#include <cstring>

namespace collwatch {
namespace {

// Any address inside libcollwatch.so identifies it.
bool IsInOurLibrary(const void* address) noexcept {
  Dl_info ours{};
  Dl_info theirs{};
  if (dladdr(reinterpret_cast<const void*>(&IsInOurLibrary), &ours) == 0) return false;
  if (dladdr(address, &theirs) == 0) return false;
  return ours.dli_fbase == theirs.dli_fbase;
}

struct Search {
  const char* name;
  void* found;
};

int SearchObject(dl_phdr_info* info, size_t, void* data) noexcept {
  auto* search = static_cast<Search*>(data);
  if (info->dlpi_name == nullptr || info->dlpi_name[0] == '\0') return 0;
  void* handle = dlopen(info->dlpi_name, RTLD_LAZY | RTLD_NOLOAD);
  if (handle == nullptr) return 0;
  void* symbol = dlsym(handle, search->name);
  dlclose(handle);  // balances the NOLOAD reference; the object stays loaded
  if (symbol == nullptr || IsInOurLibrary(symbol)) return 0;
  search->found = symbol;
  return 1;
}

}  // namespace

void* FindRealSymbol(const char* name) noexcept {
  void* symbol = dlsym(RTLD_NEXT, name);
  if (symbol != nullptr && !IsInOurLibrary(symbol)) return symbol;
  Search search{name, nullptr};
  dl_iterate_phdr(SearchObject, &search);
  return search.found;
}

}  // namespace collwatch
