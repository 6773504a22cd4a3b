# One deadline per transfer call: batches to a SIGSTOPped peer or holder end within the
# transfer timeout plus a margin; a healthy 1 GiB batch still completes.
mc_add_test(test_deadline SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_deadline.c
            ${CMAKE_CURRENT_SOURCE_DIR}/../support/proc.c
            ${CMAKE_CURRENT_SOURCE_DIR}/../support/cluster.c LIBS mc_store TIMEOUT 600 COST 70)
target_include_directories(test_deadline PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/../support)
add_dependencies(test_deadline te_peer mooncake_client mooncake_master)
