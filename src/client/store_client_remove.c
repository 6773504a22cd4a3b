/*
 * store_client_remove.c — the real client's exist, remove, remove_all and remove_by_regex: one
 * master call each, whose answers are per-key codes or a count. A removal returns once the files
 * of the values it discarded are confirmed deleted (mc_real_wait_deletions).
 */
#include "store_client_internal.h"

#include <stdlib.h>

/* One RPC over keys whose results are per-key codes (exist, remove); results[i] arrives with key
 * i's check (store_backend.h). */
static int per_key_call(mc_real_client_t *s, uint16_t opcode, const char *const *keys, size_t n,
                        int force, int *results)
{
    char **ks = calloc(n ? n : 1, sizeof(char *));
    size_t *idx = calloc(n ? n : 1, sizeof(size_t));
    if (!ks || !idx) {
        free(ks);
        free(idx);
        return MC_ERR_INTERNAL_ERROR;
    }
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        if (results[i] == 0) {
            ks[m] = (char *)keys[i];
            idx[m++] = i;
        }
    }
    int rc = 0;
    Mc__KeysResponse *resp = NULL;
    if (m > 0) {
        rc = mc_real_keys_call(s, opcode, ks, NULL, m, NULL, force, NULL, &resp);
        for (size_t j = 0; j < m; j++) {
            if (rc != 0)
                results[idx[j]] = rc;
            else if (opcode == MC_RPC_EXIST_KEY && resp->results[j]->code == 0)
                results[idx[j]] = resp->results[j]->exists ? 1 : 0;
            else
                results[idx[j]] = resp->results[j]->code;
        }
        if (rc == 0 && opcode == MC_RPC_REMOVE &&
            mc_real_wait_deletions(s, ks, m, resp->deletions_from, resp->deletions_to) != 0) {
            for (size_t j = 0; j < m; j++) {
                if (results[idx[j]] == 0)
                    results[idx[j]] = MC_ERR_PERSISTENT_FAIL;
            }
        }
        if (resp)
            mc__keys_response__free_unpacked(resp, NULL);
    }
    free(ks);
    free(idx);
    for (size_t i = 0; rc == 0 && i < n; i++) {
        if (results[i] < 0)
            rc = results[i];
    }
    return rc;
}

int mc_real_exist(void *impl, const char *const *keys, size_t n, int *results)
{
    return per_key_call(impl, MC_RPC_EXIST_KEY, keys, n, 0, results);
}

int mc_real_remove(void *impl, const char *const *keys, size_t n, int force, int *results)
{
    return per_key_call(impl, MC_RPC_REMOVE, keys, n, force, results);
}

/* remove_all (regex NULL) and remove_by_regex: the count removed, once their files are gone. */
static int64_t count_call(mc_real_client_t *s, uint16_t opcode, const char *regex, int force)
{
    Mc__KeysResponse *resp;
    int rc = mc_real_keys_call(s, opcode, NULL, NULL, 0, NULL, force, regex, &resp);
    if (rc != 0)
        return rc;
    int64_t count = resp->count;
    rc = mc_real_wait_deletions(s, NULL, 0, resp->deletions_from, resp->deletions_to);
    mc__keys_response__free_unpacked(resp, NULL);
    return rc != 0 ? rc : count;
}

int64_t mc_real_remove_all(void *impl, int force)
{
    return count_call(impl, MC_RPC_REMOVE_ALL, NULL, force);
}

int64_t mc_real_remove_by_regex(void *impl, const char *regex, int force)
{
    return count_call(impl, MC_RPC_REMOVE_BY_REGEX, regex, force);
}
