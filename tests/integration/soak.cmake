# Fault soak (issue 10): real master + holders SIGSTOPped/SIGKILLed at random while 8 threads
# verify every read. ctest runs a short soak (MC_SOAK_SECONDS, shorter under sanitizers); run
# build/tests/integration/fault_soak --duration=600 by hand for a long one.
if(MC_SANITIZE)
  set(MC_SOAK_SECONDS_DEFAULT 25)
else()
  set(MC_SOAK_SECONDS_DEFAULT 35)
endif()
set(MC_SOAK_SECONDS ${MC_SOAK_SECONDS_DEFAULT} CACHE STRING "seconds of the ctest fault soak")
add_executable(fault_soak ${CMAKE_CURRENT_SOURCE_DIR}/fault_soak.c
               ${CMAKE_CURRENT_SOURCE_DIR}/../support/proc.c
               ${CMAKE_CURRENT_SOURCE_DIR}/../support/cluster.c)
target_link_libraries(fault_soak PRIVATE mc_store Threads::Threads)
target_include_directories(fault_soak PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/../support)
target_compile_definitions(fault_soak PRIVATE MC_BUILD_DIR="${PROJECT_BINARY_DIR}")
add_dependencies(fault_soak mooncake_client mooncake_master)
add_test(NAME fault_soak COMMAND fault_soak --json=${CMAKE_CURRENT_BINARY_DIR}/fault_soak.json)
set_tests_properties(fault_soak PROPERTIES TIMEOUT 300
                     ENVIRONMENT "MC_SOAK_SECONDS=${MC_SOAK_SECONDS}")
