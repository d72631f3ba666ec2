#include "runtime/ModuleLoader.h"

#include "ir/Quote.h"

#include <dlfcn.h>

#include <filesystem>
#include <fstream>
#include <set>

namespace einstage {

namespace {
bool is_module_name(std::string_view name) {
  if (name.empty() || name.front() == '.' || name.back() == '.') return false;
  char prev = '.';
  for (char c : name) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || (c == '.' && prev != '.');
    if (!ok) return false;
    prev = c;
  }
  return true;
}
}  // namespace

void check_module_descriptor(const EinstageModuleDescriptor* d, std::string_view origin) {
  const bool linked = origin == "linked";
  if (!d) {
    if (linked) fail(ErrorKind::invalid_argument, "Runtime::add_module was given no descriptor (null)");
    fail(ErrorKind::runtime, "module '{}': its entry point returned no descriptor (null); return the address of a "
         "static EinstageModuleDescriptor", shown_arg(origin));
  }
  // Before the name is known to be sane, a file is named by its path; a linked-in module by whatever name it has.
  // Names and paths are echoed escaped (ir/Quote.h): a descriptor's strings are not trusted until checked.
  std::string early = linked ? fmt::format("module '{}' (linked in)", shown_arg(d->name ? d->name : ""))
                             : fmt::format("module '{}'", shown_arg(origin));
  // Descriptors of ABI version 2 on have the build id second; older ones have no build id (their second field is
  // the name).
  const bool has_build_id = d->abi_version >= 2;
  std::string_view build = has_build_id && d->build_id ? std::string_view(d->build_id) : std::string_view();
  if (d->abi_version != kModuleAbiVersion || build != kBuildId)
    fail(ErrorKind::runtime, "{} was built against einstage module ABI version {}, build {}, but this einstage is ABI "
         "version {}, build '{}'; rebuild the module against this einstage's installed headers "
         "(find_package(einstage) of this installation)", early, d->abi_version,
         !has_build_id ? std::string("unknown (no build id before ABI version 2)")
                       : d->build_id ? fmt::format("'{}'", shown_arg(build)) : std::string("null"),
         kModuleAbiVersion, kBuildId);
  std::string_view name = d->name ? d->name : "";
  if (!is_module_name(name))
    fail(ErrorKind::runtime, "{}: module name '{}' is malformed; expected [a-z0-9_] segments joined by '.' (e.g. "
         "\"einstage.einsum\")", early, shown_arg(name));
  std::string who = linked ? fmt::format("module '{}' (linked in)", name)
                           : fmt::format("module '{}' ('{}')", name, shown_arg(origin));
  if (!d->version || !*d->version) fail(ErrorKind::runtime, "{}: the descriptor has no version string", who);
  if (!d->families || d->family_count == 0)
    fail(ErrorKind::runtime, "{} provides no extension family; list at least one in its descriptor", who);
  std::set<std::string_view> seen;
  for (size_t i = 0; i < d->family_count; ++i) {
    const EinstageFamilyEntry& f = d->families[i];
    std::string_view family = f.family ? f.family : "";
    if (!is_family_name(family))
      fail(ErrorKind::runtime, "{}: family {} is named '{}', which is not a family name; expected [a-z0-9_] segments "
           "joined by '.' ending in .v<N> (e.g. \"einstage.einsum.v1\")", who, i, shown_arg(family));
    if (!f.register_family) fail(ErrorKind::runtime, "{}: family \"{}\" has no registration function", who, family);
    if (!seen.insert(family).second) fail(ErrorKind::runtime, "{} lists family \"{}\" twice", who, family);
  }
}

ModuleLibrary open_module_library(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec))
    fail(ErrorKind::io, "cannot load module '{}': no such file", shown_arg(path));
  if (std::filesystem::is_directory(path, ec))
    fail(ErrorKind::io, "cannot load module '{}': it is a directory, not a shared library", shown_arg(path));
  if (!std::ifstream(path, std::ios::binary).good())
    fail(ErrorKind::io, "cannot load module '{}': the file is not readable", shown_arg(path));
  ModuleLibrary lib;
  lib.path = path;
  // A path without '/' would make dlopen search the library path instead of opening this file.
  std::string open_path = path.find('/') == std::string::npos ? "./" + path : path;
  lib.handle = ::dlopen(open_path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!lib.handle) {
    const char* why = ::dlerror();
    fail(ErrorKind::runtime, "cannot load module '{}': {}", shown_arg(path),
         escape_for_message(why ? why : "dlopen failed", '\'', 2 * kEchoLimit));  // dlerror repeats the path
  }
  ::dlerror();
  void* sym = ::dlsym(lib.handle, EINSTAGE_MODULE_ENTRY_SYMBOL);
  if (!sym) {
    ::dlclose(lib.handle);
    fail(ErrorKind::runtime, "cannot load module '{}': it has no entry point '{}'; define it with "
         "EINSTAGE_DEFINE_MODULE_ENTRY (runtime/Module.h)", shown_arg(path), EINSTAGE_MODULE_ENTRY_SYMBOL);
  }
  auto entry = reinterpret_cast<EinstageModuleEntryFn>(sym);
  try {
    lib.descriptor = entry();
    check_module_descriptor(lib.descriptor, path);
  } catch (...) {
    ::dlclose(lib.handle);
    throw;
  }
  return lib;
}

void close_module_library(ModuleLibrary& library) {
  if (library.handle) ::dlclose(library.handle);
  library.handle = nullptr;
  library.descriptor = nullptr;
}

}  // namespace einstage
