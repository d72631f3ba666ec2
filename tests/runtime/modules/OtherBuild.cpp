// A test module compiled against another einstage build: its CMake target puts a runtime/BuildId.h generated for a
// different build ahead of this build's, so kBuildId below is that build's id while the ABI version matches. The
// loader must refuse it naming both builds, before it registers anything.
#include "runtime/Module.h"

namespace {
void never_called(einstage::ModuleRegistrar&) { EIN_ASSERT(false, "a refused module was asked to register"); }
constexpr EinstageFamilyEntry kFamilies[] = {{"test.other_build.v1", &never_called}};
constexpr EinstageModuleDescriptor kDescriptor = {einstage::kModuleAbiVersion, einstage::kBuildId, "test.other_build",
                                                  "0.0.1", kFamilies, 1};
const EinstageModuleDescriptor* descriptor() { return &kDescriptor; }
}  // namespace

EINSTAGE_DEFINE_MODULE_ENTRY(descriptor)
