# core_sources.cmake — sources of mc_master_core: the Master Service's logic without networking
# (object index, per-segment allocator, placement, leases, eviction, liveness, offload tasks and
# disk replicas, RemoveByRegex patterns on PCRE2, the journal and snapshots of object records).
set(MC_MASTER_CORE_SOURCES
    ${CMAKE_CURRENT_SOURCE_DIR}/allocator.c
    ${CMAKE_CURRENT_SOURCE_DIR}/object_index.c
    ${CMAKE_CURRENT_SOURCE_DIR}/key_regex.c
    ${CMAKE_CURRENT_SOURCE_DIR}/eviction.c
    ${CMAKE_CURRENT_SOURCE_DIR}/offload.c
    ${CMAKE_CURRENT_SOURCE_DIR}/promotion.c
    ${CMAKE_CURRENT_SOURCE_DIR}/task_manager.c
    ${CMAKE_CURRENT_SOURCE_DIR}/restore_table.c
    ${CMAKE_CURRENT_SOURCE_DIR}/journal.c
    ${CMAKE_CURRENT_SOURCE_DIR}/restore.c
    ${CMAKE_CURRENT_SOURCE_DIR}/snapshot.c
    ${CMAKE_CURRENT_SOURCE_DIR}/master_service.c
    ${CMAKE_CURRENT_SOURCE_DIR}/extents.c
    ${CMAKE_CURRENT_SOURCE_DIR}/clients.c
    ${CMAKE_CURRENT_SOURCE_DIR}/objects.c
    ${CMAKE_CURRENT_SOURCE_DIR}/segments.c
    ${CMAKE_CURRENT_SOURCE_DIR}/puts.c
    ${CMAKE_CURRENT_SOURCE_DIR}/reads.c
    ${CMAKE_CURRENT_SOURCE_DIR}/removal.c
    ${CMAKE_CURRENT_SOURCE_DIR}/stats.c
    ${CMAKE_CURRENT_SOURCE_DIR}/monitor.c
    ${CMAKE_CURRENT_SOURCE_DIR}/extensions.c
    ${CMAKE_CURRENT_SOURCE_DIR}/master_lifecycle.c)
