# einstage_add_module(target sources... [LIBS libs...]): builds an einstage extension module, a shared library that
# Runtime::load_module opens by path. Included by einstage's own build and, installed, by the package config
# (find_package(einstage) defines it), so an out-of-tree module is built exactly like extensions/tropical/.
#
# LIBS are the einstage libraries the module calls into (einstage::einstage_ir, einstage::einstage_runtime, ...):
# they are linked as the shared libraries the host has loaded, so host and modules share one copy of each, hence one
# JIT and one kernel cache, and the module holds only its own code. Its one export is einstage_module_entry
# (einstageModule.map); the einstage, fmt and standard-library code it instantiates from headers stays local.
# --no-undefined reports a missing symbol at link time instead of at dlopen, except when the flags ask for a
# sanitizer (its runtime comes from the host executable at load).
set(EINSTAGE_MODULE_MAP "${CMAKE_CURRENT_LIST_DIR}/einstageModule.map")

function(einstage_add_module target)
  cmake_parse_arguments(ARG "" "" "LIBS" ${ARGN})
  add_library(${target} MODULE ${ARG_UNPARSED_ARGUMENTS})
  target_link_libraries(${target} PRIVATE ${ARG_LIBS})
  set_target_properties(${target} PROPERTIES LINK_DEPENDS "${EINSTAGE_MODULE_MAP}")
  target_link_options(${target} PRIVATE "LINKER:--version-script=${EINSTAGE_MODULE_MAP}")
  if(DEFINED EINSTAGE_NO_UNDEFINED)  # einstage's own build decides (sanitizer, TSan and fuzz builds)
    target_link_options(${target} PRIVATE ${EINSTAGE_NO_UNDEFINED})
  elseif(NOT CMAKE_CXX_FLAGS MATCHES "-fsanitize")
    target_link_options(${target} PRIVATE "LINKER:--no-undefined")
  endif()
endfunction()
