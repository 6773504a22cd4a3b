# Offload integration tests: real mooncake_master --enable_offload and mooncake_client
# --enable_offload processes on loopback, with local and distributed (posix) backends in a
# temporary directory.
mc_add_test(test_offload SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_offload.c
            ${CMAKE_CURRENT_SOURCE_DIR}/../support/proc.c LIBS mc_store TIMEOUT 900)
target_include_directories(test_offload PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/../support)
add_dependencies(test_offload mooncake_client mooncake_master)
