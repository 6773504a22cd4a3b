/*
 * test_rpc_methods.c — the master's RPC methods come from one list (MC_RPC_METHOD_LIST in
 * src/wire/rpc.h): the opcodes on the wire and upstream's method names stay what they were, each
 * opcode is unique, and the enum, the names, the count and the master's handler table derived
 * from the list agree with each other.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <string.h>

#include "rpc.h"
#include "rpc_internal.h"

/* The wire: these values and names are part of the protocol and of the metrics' labels. */
static const struct {
    uint16_t opcode;
    const char *name;
} wire[] = {
    {100, "ServiceReady"},
    {101, "Ping"},
    {102, "MountSegment"},
    {103, "ReMountSegment"},
    {104, "UnmountSegment"},
    {170, "GracefulUnmountSegment"},
    {110, "PutStart"},
    {111, "PutEnd"},
    {112, "PutRevoke"},
    {113, "UpsertStart"},
    {114, "UpsertEnd"},
    {115, "UpsertRevoke"},
    {120, "GetReplicaList"},
    {121, "ExistKey"},
    {122, "ReleaseReadLease"},
    {130, "Remove"},
    {131, "RemoveAll"},
    {132, "RemoveByRegex"},
    {140, "OffloadObjectHeartbeat"},
    {141, "NotifyOffloadSuccess"},
    {142, "BatchEvictDiskReplica"},
    {143, "OffloadDeletionsPending"},
    {180, "PromotionAllocStart"},
    {181, "NotifyPromotionResult"},
    {160, "CreateCopyTask"},
    {161, "CreateMoveTask"},
    {162, "QueryTask"},
    {163, "FetchTasks"},
    {164, "MarkTaskToComplete"},
    {165, "BatchReplicaClear"},
    {230, "RestoreVerifyFetch"},
    {231, "RestoreVerifyConfirm"},
};

static void methods_keep_their_opcodes_names_and_order(void **state)
{
    (void)state;
    assert_int_equal(MC_RPC_METHOD_COUNT, sizeof(wire) / sizeof(wire[0]));
    for (int i = 0; i < MC_RPC_METHOD_COUNT; i++) {
        assert_int_equal(mc_rpc_methods[i].opcode, wire[i].opcode);
        assert_string_equal(mc_rpc_methods[i].name, wire[i].name);
        assert_string_equal(mc_rpc_method_name(wire[i].opcode), wire[i].name);
        assert_non_null(mc_rpc_methods[i].handler);
        assert_int_equal(mc_rpc_method_index(wire[i].opcode), i);
    }
    assert_int_equal(MC_RPC_PUT_START, 110);
    assert_int_equal(MC_RPC_RESTORE_VERIFY_CONFIRM, 231);
}

static void opcodes_are_unique_and_peer_methods_are_not_the_masters(void **state)
{
    (void)state;
    for (int i = 0; i < MC_RPC_METHOD_COUNT; i++)
        for (int j = i + 1; j < MC_RPC_METHOD_COUNT; j++) {
            assert_int_not_equal(mc_rpc_methods[i].opcode, mc_rpc_methods[j].opcode);
            assert_string_not_equal(mc_rpc_methods[i].name, mc_rpc_methods[j].name);
        }
    /* Offload reads go to the disk replica's owner, never to the master. */
    assert_int_equal(MC_RPC_OFFLOAD_FETCH, 150);
    assert_int_equal(MC_RPC_OFFLOAD_RELEASE, 151);
    assert_int_equal(mc_rpc_method_index(MC_RPC_OFFLOAD_FETCH), -1);
    assert_int_equal(mc_rpc_method_index(MC_RPC_OFFLOAD_RELEASE), -1);
    assert_string_equal(mc_rpc_method_name(MC_RPC_OFFLOAD_FETCH), "OffloadFetch");
    assert_string_equal(mc_rpc_method_name(MC_RPC_OFFLOAD_RELEASE), "OffloadRelease");
    /* Anything else is unknown. */
    assert_int_equal(mc_rpc_method_index(0), -1);
    assert_int_equal(mc_rpc_method_index(MC_RPC_PUT_START | MC_RPC_REPLY), -1);
    assert_string_equal(mc_rpc_method_name(999), "Unknown");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(methods_keep_their_opcodes_names_and_order),
        cmocka_unit_test(opcodes_are_unique_and_peer_methods_are_not_the_masters),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
