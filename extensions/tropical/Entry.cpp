// The entry point of the tropical module's shared library.
#include "extensions/tropical/Tropical.h"

EINSTAGE_DEFINE_MODULE_ENTRY(tropical::module_descriptor)
