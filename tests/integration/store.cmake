# Store integration tests: real mooncake_master and mooncake_client processes on loopback.
add_executable(store_writer ${CMAKE_CURRENT_SOURCE_DIR}/store_writer.c)
target_link_libraries(store_writer PRIVATE mc_store)
mc_add_test(test_store SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_store.c
            ${CMAKE_CURRENT_SOURCE_DIR}/../support/proc.c
            ${CMAKE_CURRENT_SOURCE_DIR}/../support/cluster.c LIBS mc_store TIMEOUT 600)
target_include_directories(test_store PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/../support)
add_dependencies(test_store store_writer mooncake_client mooncake_master)
