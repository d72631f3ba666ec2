// The entry point of the shared-library build of the linalg module (target einstage_linalg_module). Only that target
// compiles this file, so programs that link the module in carry no entry symbol of their own.
#include "extensions/api/Extension.h"
#include "extensions/linalg/Module.h"

EINSTAGE_DEFINE_MODULE_ENTRY(einstage::linalg::module_descriptor)
