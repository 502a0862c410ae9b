# cassini_include_module_hooks()
#
# Includes every *.cmake file in the current directory, in name order. Test,
# fuzz and bench directories use it so each module registers its targets in
# its own file (tests/unit/ring.cmake, bench/storage.cmake, ...) and work on
# different modules never edits the same list.
macro(cassini_include_module_hooks)
  file(GLOB _cassini_hooks CONFIGURE_DEPENDS
       ${CMAKE_CURRENT_SOURCE_DIR}/*.cmake)
  list(SORT _cassini_hooks)
  foreach(_hook ${_cassini_hooks})
    include(${_hook})
  endforeach()
endmacro()
