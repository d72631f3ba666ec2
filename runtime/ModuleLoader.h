// Opening extension modules: dlopen a shared library by path, find its entry point, check the descriptor it returns
// (ABI version first). Stage: runtime. Depends on runtime/Module.h; the dlopen/dlsym boundary is here and nowhere
// else, and its errors become einstage::Error (ErrorKind::runtime / io) naming the file.
//
// The library is opened RTLD_NOW | RTLD_LOCAL: every symbol is resolved at load time (a missing one is reported by
// the loader, not as a crash later) and the module's symbols do not leak into other modules. A library whose
// descriptor is refused is closed again; one whose families were committed stays loaded for the process lifetime
// (runtime/Module.h says why).
#pragma once

#include "runtime/Module.h"

#include <string>

namespace einstage {

struct ModuleLibrary {
  std::string path;
  void* handle = nullptr;
  const EinstageModuleDescriptor* descriptor = nullptr;
};

/// Opens `path`, calls its einstage_module_entry() and checks the descriptor (check_module_descriptor). Fails naming
/// the file when it is missing or unreadable, is not a loadable library, lacks the entry symbol, returns no
/// descriptor, or was built for another ABI version.
ModuleLibrary open_module_library(const std::string& path);

/// Closes a library whose module was refused after opening (e.g. a family conflict). Never call it on a module
/// whose families were committed.
void close_module_library(ModuleLibrary& library);

/// Checks a descriptor from a library or from a linked-in module: not null, ABI version == kModuleAbiVersion, a
/// module name of [a-z0-9_] segments joined by '.', a version string, at least one family, each with a well-formed
/// family name (ir's is_family_name) and a registration function, and no family listed twice. `origin` is the
/// library's path, or "linked" for a linked-in module; messages name the module by it.
void check_module_descriptor(const EinstageModuleDescriptor* descriptor, std::string_view origin);

}  // namespace einstage
