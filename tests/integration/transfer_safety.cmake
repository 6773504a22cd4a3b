# Transfer Engine safety tests: epochs, finish times, whole-request deadlines and
# aborted connections, against te_peer target processes (built by transfer.cmake).
mc_add_test(test_transfer_safety SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_transfer_safety.c
            ${CMAKE_CURRENT_SOURCE_DIR}/../support/proc.c LIBS mc_transfer TIMEOUT 180)
target_include_directories(test_transfer_safety PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/../support)
add_dependencies(test_transfer_safety te_peer)
