# cmake/daos.cmake — libdfs for the DAOS FS adapter (src/storage/daos), included by the top level.
#
#   -DUSE_DAOS=ON                      the real library, found (first match wins) through
#                                      1. pkg-config mass  (MASS client package, as the guide says)
#                                      2. pkg-config daos
#                                      3. find_library dfs duns daos gurt uuid + find_path
#                                         daos.h daos_fs.h daos_uns.h (hint: -DDAOS_PREFIX=/opt/daos)
#                                      else a configure error naming what is missing.
#   -DUSE_DAOS=ON -DDAOS_TEST_DOUBLE=ON  the test double of tests/support/dfs_double instead (CI:
#                                      no DAOS on Debian). DAOS_TEST_DOUBLE alone builds the double.
# Result: the INTERFACE target mc_daos (include dirs + libraries), and MC_DAOS_PROVIDER (text).
if(DAOS_TEST_DOUBLE)
  add_subdirectory(${PROJECT_SOURCE_DIR}/tests/support/dfs_double ${PROJECT_BINARY_DIR}/dfs_double)
endif()
if(NOT USE_DAOS)
  return()
endif()

add_library(mc_daos INTERFACE)
if(DAOS_TEST_DOUBLE)
  target_link_libraries(mc_daos INTERFACE dfs_double)
  set(MC_DAOS_PROVIDER "test double (tests/support/dfs_double)")
else()
  set(DAOS_PREFIX "" CACHE PATH "DAOS install prefix, when neither mass.pc nor daos.pc exists")
  pkg_check_modules(MC_DAOS_PC QUIET IMPORTED_TARGET mass)
  set(MC_DAOS_PROVIDER "pkg-config mass")
  if(NOT MC_DAOS_PC_FOUND)
    pkg_check_modules(MC_DAOS_PC QUIET IMPORTED_TARGET daos)
    set(MC_DAOS_PROVIDER "pkg-config daos")
  endif()
  if(MC_DAOS_PC_FOUND)
    target_link_libraries(mc_daos INTERFACE PkgConfig::MC_DAOS_PC)
  else()
    set(MC_DAOS_PROVIDER "find_library (DAOS_PREFIX='${DAOS_PREFIX}')")
  endif()
  # Whatever the .pc files do not provide is looked for next to what they point at.
  set(_hints ${MC_DAOS_PC_INCLUDE_DIRS} ${MC_DAOS_PC_LIBRARY_DIRS})
  if(DAOS_PREFIX)
    list(APPEND _hints ${DAOS_PREFIX}/include ${DAOS_PREFIX}/lib64 ${DAOS_PREFIX}/lib
         ${DAOS_PREFIX}/lib/x86_64-linux-gnu)
  endif()
  set(_missing "")
  foreach(_hdr daos.h daos_fs.h daos_uns.h)
    string(MAKE_C_IDENTIFIER "MC_DAOS_HDR_${_hdr}" _var)
    find_path(${_var} ${_hdr} HINTS ${_hints} PATHS /usr/include /opt/daos/include)
    if(${_var})
      target_include_directories(mc_daos INTERFACE ${${_var}})
    else()
      list(APPEND _missing "header ${_hdr}")
    endif()
  endforeach()
  foreach(_lib dfs duns daos gurt uuid)
    if("${_lib}" IN_LIST MC_DAOS_PC_LIBRARIES)
      continue()
    endif()
    find_library(MC_DAOS_LIB_${_lib} ${_lib} HINTS ${_hints}
                 PATHS /usr/lib64 /opt/daos/lib64 /opt/daos/lib)
    if(MC_DAOS_LIB_${_lib})
      target_link_libraries(mc_daos INTERFACE ${MC_DAOS_LIB_${_lib}})
    else()
      list(APPEND _missing "library lib${_lib}")
    endif()
  endforeach()
  if(_missing)
    list(JOIN _missing ", " _missing_text)
    message(FATAL_ERROR
      "USE_DAOS=ON but the DAOS client development files are missing: ${_missing_text}. "
      "Tried pkg-config mass, pkg-config daos and find_library/find_path "
      "(set -DDAOS_PREFIX=<prefix> for a DAOS in a custom place). Install "
      "the full mass-client package (Ubuntu or RHEL/Rocky 9) or daos-devel + libuuid-devel; or "
      "configure with -DDAOS_TEST_DOUBLE=ON to build against the test double.")
  endif()
endif()
message(STATUS "DAOS FS adapter: libdfs from ${MC_DAOS_PROVIDER}")
