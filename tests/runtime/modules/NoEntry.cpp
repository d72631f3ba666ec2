// A shared library that is not an einstage module: it loads but has no einstage_module_entry symbol.
extern "C" __attribute__((visibility("default"))) int not_an_einstage_module(void) { return 42; }
