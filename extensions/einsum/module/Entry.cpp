// The entry point of the shared-library build of the einsum module (target einstage_einsum_module). Only that
// target compiles this file, so programs that link the einsum module in carry no entry symbol of their own.
#include "extensions/einsum/Module.h"

EINSTAGE_DEFINE_MODULE_ENTRY(einstage::einsum::module_descriptor)
