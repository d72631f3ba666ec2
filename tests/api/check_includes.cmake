# The public kernel API's boundary and the einsum tower, checked on the include lines of extensions/ (ctest
# "api_includes"):
# - a header under extensions/api/ includes no runtime/jit/ header (the JIT, and LLVM behind it, stay private);
# - every other file under extensions/ includes, from runtime/, only headers that a header under extensions/api/
#   includes directly (the re-exported ones: runtime/Context.h, runtime/Contract.h, runtime/kernels/Layout.h, ...).
# - inside extensions/einsum/, the family's tower (extensions/einsum/README.md) stands: its sub-folders from the
#   ground up are notation/, planner/, exec/ and op/, and the files directly in extensions/einsum/ (Module.h,
#   Module.cpp) and module/ are the top floor; a file includes from its own floor and the floors below, never above.
# - inside runtime/, the JIT stands below the execution context: a file under runtime/jit/ includes from runtime/
#   only runtime/jit/, runtime/kernels/ and the headers below the JIT (runtime/ThreadPool.h, runtime/Contract.h,
#   runtime/Cpus.h), never runtime/Context.h or anything else that owns or runs the JIT (the context hands the JIT what
#   it needs through runtime/jit/JitState.h), and a file under runtime/kernels/ includes no runtime/jit/ header.
# Each offending line is reported with its file, line and header, then the script fails.
# Usage: cmake -DROOT=<source tree> -P tests/api/check_includes.cmake (tests/api/fixture/ is a tree that must fail)
# A tree without runtime/ (none of its files found) checks the extensions' rules only.
cmake_minimum_required(VERSION 3.25)
if(NOT ROOT)
  message(FATAL_ERROR "api_includes: pass -DROOT=<the source tree whose extensions/ to check>")
endif()

# The runtime headers included by `file`, as a list of "line:header".
function(runtime_includes file out)
  file(STRINGS "${file}" lines)
  set(found "")
  set(n 0)
  foreach(line IN LISTS lines)
    math(EXPR n "${n} + 1")
    if(line MATCHES "^[ \t]*#[ \t]*include[ \t]*[<\"](runtime/[^>\"]+)[>\"]")
      list(APPEND found "${n}:${CMAKE_MATCH_1}")
    endif()
  endforeach()
  set(${out} "${found}" PARENT_SCOPE)
endfunction()

# split_include("LINE:HEADER" line_var header_var): one entry of runtime_includes' list, split.
macro(split_include inc line_var header_var)
  string(REGEX REPLACE "^([0-9]+):(.*)$" "\\1" ${line_var} "${inc}")
  string(REGEX REPLACE "^([0-9]+):(.*)$" "\\2" ${header_var} "${inc}")
endmacro()

set(errors "")
set(public "")
file(GLOB api_headers "${ROOT}/extensions/api/*.h")
if(NOT api_headers)
  message(FATAL_ERROR "api_includes: ${ROOT}/extensions/api/ has no header")
endif()
foreach(h IN LISTS api_headers)
  file(RELATIVE_PATH rel "${ROOT}" "${h}")
  runtime_includes("${h}" incs)
  foreach(inc IN LISTS incs)
    split_include("${inc}" line header)
    if(header MATCHES "^runtime/jit/")
      string(APPEND errors "${rel}:${line}: the public API includes ${header}, a JIT header; the JIT stays "
        "private to libeinstage_runtime.so (declare what modules need in a runtime header without jit/ includes)\n")
    else()
      list(APPEND public "${header}")
    endif()
  endforeach()
endforeach()
list(REMOVE_DUPLICATES public)
list(SORT public)
string(REPLACE ";" ", " public_text "${public}")

file(GLOB_RECURSE sources "${ROOT}/extensions/*.h" "${ROOT}/extensions/*.cpp")
list(FILTER sources EXCLUDE REGEX "/extensions/api/")
foreach(f IN LISTS sources)
  file(RELATIVE_PATH rel "${ROOT}" "${f}")
  runtime_includes("${f}" incs)
  foreach(inc IN LISTS incs)
    split_include("${inc}" line header)
    if(NOT header IN_LIST public)
      string(APPEND errors "${rel}:${line}: includes ${header}, a private runtime header; include "
        "extensions/api/Kernels.h instead (it re-exports ${public_text}) or make the header public by including "
        "it from a header under extensions/api/\n")
    endif()
  endforeach()
endforeach()

# The einsum tower, from the ground up; a file of extensions/einsum/ outside these sub-folders is on the top floor.
set(einsum_tower notation planner exec op)
list(LENGTH einsum_tower einsum_top)
set(einsum_floors "${einsum_tower};the top (Module.h, Module.cpp, module/)")
string(REPLACE ";" " < " einsum_order "${einsum_floors}")
# The floor (index into einsum_floors) of `rel`, a path under extensions/einsum/.
function(einsum_floor rel out)
  set(floor ${einsum_top})
  if(rel MATCHES "^extensions/einsum/([^/]+)/")
    list(FIND einsum_tower "${CMAKE_MATCH_1}" found)
    if(found GREATER -1)
      set(floor ${found})
    endif()
  endif()
  set(${out} ${floor} PARENT_SCOPE)
endfunction()
file(GLOB_RECURSE einsum_sources "${ROOT}/extensions/einsum/*.h" "${ROOT}/extensions/einsum/*.cpp")
foreach(f IN LISTS einsum_sources)
  file(RELATIVE_PATH rel "${ROOT}" "${f}")
  einsum_floor("${rel}" own)
  file(STRINGS "${f}" lines)
  set(n 0)
  foreach(line IN LISTS lines)
    math(EXPR n "${n} + 1")
    if(line MATCHES "^[ \t]*#[ \t]*include[ \t]*[<\"](extensions/einsum/[^>\"]+)[>\"]")
      set(header "${CMAKE_MATCH_1}")
      einsum_floor("${header}" target)
      if(target GREATER own)
        list(GET einsum_floors ${own} own_name)
        list(GET einsum_floors ${target} target_name)
        string(APPEND errors "${rel}:${n}: includes ${header}, which stands on floor ${target_name} of the einsum "
          "tower, above this file's floor ${own_name} (${einsum_order}); move what both need down to ${own_name} or "
          "below instead\n")
      endif()
    endif()
  endforeach()
endforeach()
list(LENGTH einsum_sources einsum_checked)

# The runtime's two floors: runtime/kernels/ < runtime/jit/ < the rest of runtime/, with the headers the JIT may use.
set(below_jit runtime/ThreadPool.h runtime/Contract.h runtime/Cpus.h)
string(REPLACE ";" ", " below_jit_text "${below_jit}")
file(GLOB_RECURSE jit_sources "${ROOT}/runtime/jit/*.h" "${ROOT}/runtime/jit/*.cpp")
foreach(f IN LISTS jit_sources)
  file(RELATIVE_PATH rel "${ROOT}" "${f}")
  runtime_includes("${f}" incs)
  foreach(inc IN LISTS incs)
    split_include("${inc}" line header)
    if(NOT header MATCHES "^runtime/(jit|kernels)/" AND NOT header IN_LIST below_jit)
      string(APPEND errors "${rel}:${line}: includes ${header}, which stands above the JIT (runtime/ includes "
        "runtime/jit/, one way; below the JIT are runtime/kernels/ and ${below_jit_text}); hand what the JIT needs "
        "through runtime/jit/JitState.h instead\n")
    endif()
  endforeach()
endforeach()
file(GLOB_RECURSE kernel_sources "${ROOT}/runtime/kernels/*.h" "${ROOT}/runtime/kernels/*.cpp")
foreach(f IN LISTS kernel_sources)
  file(RELATIVE_PATH rel "${ROOT}" "${f}")
  runtime_includes("${f}" incs)
  foreach(inc IN LISTS incs)
    split_include("${inc}" line header)
    if(header MATCHES "^runtime/jit/")
      string(APPEND errors "${rel}:${line}: includes ${header}, a JIT header; the portable kernels stand below the "
        "JIT and never include it\n")
    endif()
  endforeach()
endforeach()
list(LENGTH jit_sources jit_checked)
list(LENGTH kernel_sources kernels_checked)

list(LENGTH sources checked)
if(errors)
  message(NOTICE "${errors}")  # unwrapped, one line per offending include
  message(FATAL_ERROR "api_includes: the include lines above reach past the public API (extensions/api/), up the "
    "einsum tower or up the runtime (kernels/ < jit/ < the execution context)")
endif()
message(STATUS "api_includes: ${checked} files under extensions/ include only the public runtime headers (${public_text}); "
  "${einsum_checked} files of extensions/einsum/ include down its tower only (${einsum_order}); ${jit_checked} files of "
  "runtime/jit/ and ${kernels_checked} of runtime/kernels/ include down the runtime only (kernels/ < jit/ < the rest)")
