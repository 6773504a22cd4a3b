# Integrity tests: every way a read used to return wrong bytes with success, with real
# master, holder and client processes stopped at failpoints (MC_FAILPOINTS).
add_executable(store_rw ${CMAKE_CURRENT_SOURCE_DIR}/store_rw.c)
target_include_directories(store_rw PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/../support)
target_link_libraries(store_rw PRIVATE mc_store)
mc_add_test(test_integrity SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_integrity.c
            ${CMAKE_CURRENT_SOURCE_DIR}/../support/proc.c
            ${CMAKE_CURRENT_SOURCE_DIR}/../support/cluster.c LIBS mc_store TIMEOUT 600 COST 36)
target_include_directories(test_integrity PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/../support
                           ${PROJECT_SOURCE_DIR}/src/storage)
add_dependencies(test_integrity store_rw mooncake_client mooncake_master)
