# Fault soak: a real master and holders SIGSTOPped / SIGKILLed / restarted at random
# while 8 threads verify every read (tests/integration/fault_soak.c). ctest runs two short soaks:
# fault_soak with a 1 s read lease (expiry, re-mount and lease paths) and fault_soak_no_lease
# with --default_kv_lease_ttl=0 (reads racing remove and re-put). Their length is
# -DMC_SOAK_SECONDS (default 35 s, 25 s under sanitizers; the no-lease soak runs half of it).
# Each keeps its processes' logs in fault_soak*.log beside it; a failing soak prints their
# warnings, errors and tail. Longer runs by hand: build/tests/integration/fault_soak --duration=600.
if(MC_SANITIZE)
  set(MC_SOAK_SECONDS_DEFAULT 25)
else()
  set(MC_SOAK_SECONDS_DEFAULT 35)
endif()
set(MC_SOAK_SECONDS ${MC_SOAK_SECONDS_DEFAULT} CACHE STRING "seconds of the ctest fault soak")
math(EXPR MC_SOAK_NO_LEASE_SECONDS "(${MC_SOAK_SECONDS} + 1) / 2")
add_executable(fault_soak ${CMAKE_CURRENT_SOURCE_DIR}/fault_soak.c
               ${CMAKE_CURRENT_SOURCE_DIR}/../support/proc.c
               ${CMAKE_CURRENT_SOURCE_DIR}/../support/cluster.c)
target_link_libraries(fault_soak PRIVATE mc_store Threads::Threads)
target_include_directories(fault_soak PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/../support)
target_compile_definitions(fault_soak PRIVATE MC_BUILD_DIR="${PROJECT_BINARY_DIR}")
add_dependencies(fault_soak mooncake_client mooncake_master)
add_test(NAME fault_soak COMMAND fault_soak --json=${CMAKE_CURRENT_BINARY_DIR}/fault_soak.json
                                   --log=${CMAKE_CURRENT_BINARY_DIR}/fault_soak.log)
set_tests_properties(fault_soak PROPERTIES TIMEOUT 300
                     ENVIRONMENT "MC_SOAK_SECONDS=${MC_SOAK_SECONDS}")
add_test(NAME fault_soak_no_lease
         COMMAND fault_soak --lease_ms=0
                 --json=${CMAKE_CURRENT_BINARY_DIR}/fault_soak_no_lease.json
                 --log=${CMAKE_CURRENT_BINARY_DIR}/fault_soak_no_lease.log)
set_tests_properties(fault_soak_no_lease PROPERTIES TIMEOUT 300
                     ENVIRONMENT "MC_SOAK_SECONDS=${MC_SOAK_NO_LEASE_SECONDS}")
# The same chaos with checksums off (MC_STORE_CHECKSUM=0 for the soak's clients and its
# holders): prevention, not the checksum, must keep every successful read exact — a write
# reported failed or revoked never lands in memory a later value was given (receiver fences).
add_test(NAME fault_soak_no_checksum
         COMMAND fault_soak --json=${CMAKE_CURRENT_BINARY_DIR}/fault_soak_no_checksum.json
                 --log=${CMAKE_CURRENT_BINARY_DIR}/fault_soak_no_checksum.log)
set_tests_properties(fault_soak_no_checksum PROPERTIES TIMEOUT 300
                     ENVIRONMENT "MC_SOAK_SECONDS=${MC_SOAK_NO_LEASE_SECONDS};MC_STORE_CHECKSUM=0")
