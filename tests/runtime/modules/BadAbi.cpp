// A test module built for an ABI version this einstage does not speak (999): the loader must refuse it by reading
// the first field of its descriptor, before touching anything else.
#include "runtime/Module.h"

namespace {
void never_called(einstage::ModuleRegistrar&) { EIN_ASSERT(false, "a refused module was asked to register"); }
constexpr EinstageFamilyEntry kFamilies[] = {{"test.bad_abi.v1", &never_called}};
constexpr EinstageModuleDescriptor kDescriptor = {999, "0.0.9 Other-1.0 Debug", "test.bad_abi", "0.0.1", kFamilies,
                                                  1};
const EinstageModuleDescriptor* descriptor() { return &kDescriptor; }
}  // namespace

EINSTAGE_DEFINE_MODULE_ENTRY(descriptor)
