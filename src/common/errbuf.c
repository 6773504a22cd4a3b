/*
 * errbuf.c — filling a caller's error buffer on a refusal (errbuf.h).
 */
#include "errbuf.h"

#include "mooncake/errors.h"

#include <stdarg.h>
#include <stdio.h>

int mc_fail(char *err, size_t errlen, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    if (err && errlen > 0)
        vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
    return MC_ERR_INVALID_PARAMS;
}
