/*
 * errors.c — names of the store's error codes (include/mooncake/errors.h).
 *
 * The table is generated from the same X-macro list as the enum, so a code and its name cannot
 * drift apart.
 */
#include "mooncake/errors.h"

#include <stddef.h>

struct mc_error_entry {
    int code;
    const char *name;
};

#define MC_ERROR_TABLE_ENTRY(name, value) {(value), #name},
static const struct mc_error_entry error_table[] = {MC_ERROR_LIST(MC_ERROR_TABLE_ENTRY)};
#undef MC_ERROR_TABLE_ENTRY

const char *mc_error_name(int code)
{
    for (size_t i = 0; i < sizeof(error_table) / sizeof(error_table[0]); i++) {
        if (error_table[i].code == code)
            return error_table[i].name;
    }
    return "UNKNOWN_ERROR";
}

int mc_error_is_known(int code)
{
    for (size_t i = 0; i < sizeof(error_table) / sizeof(error_table[0]); i++) {
        if (error_table[i].code == code)
            return 1;
    }
    return 0;
}
