/*
 * parse.h — human-readable sizes, durations and booleans, as upstream Mooncake's programs accept.
 *
 * Sizes: a number (decimals allowed) with an optional unit, an optional space between:
 * "4096", "16MB", "32 GB", "1.5g", "64 KiB". Units are binary (1024-based) and case-insensitive,
 * as upstream's: B, K/KB/KiB, M/MB/MiB, G/GB/GiB, T/TB/TiB. "50%", negative numbers, empty
 * strings, trailing garbage and results above 2^63-1 are rejected.
 *
 * Durations: milliseconds by default ("500"), or with a suffix ms|s|m|h ("500ms", "10s", "1m").
 *
 * All functions are pure and thread-safe. On failure they return MC_ERR_INVALID_PARAMS and, when
 * `err` is not NULL, write one readable sentence into it (NUL-terminated, truncated to errlen).
 */
#ifndef MC_COMMON_PARSE_H
#define MC_COMMON_PARSE_H

#include <stddef.h>
#include <stdint.h>

int mc_parse_size(const char *text, uint64_t *bytes, char *err, size_t errlen);
int mc_parse_duration_ms(const char *text, uint64_t *ms, char *err, size_t errlen);
/* "1|0|true|false|yes|no|on|off" (case-insensitive). */
int mc_parse_bool(const char *text, int *value, char *err, size_t errlen);
/* Whole decimal integer in [min, max]. */
int mc_parse_int64(const char *text, int64_t min, int64_t max, int64_t *value, char *err,
                   size_t errlen);
/* Finite decimal number in [min, max]. */
int mc_parse_double(const char *text, double min, double max, double *value, char *err,
                    size_t errlen);
/* Formats bytes for people: "32.0 GiB", "512 B". Writes into buf, returns buf. */
const char *mc_format_size(uint64_t bytes, char *buf, size_t buflen);

/* A field of /proc/meminfo as the kernel writes it (kB for sizes such as "MemAvailable", a count
 * for "HugePages_Free"); -1 when the file or the field is absent. */
int64_t mc_meminfo(const char *field);

/* 1 when more threads are runnable than this host has online CPUs (the runnable count of
 * /proc/loadavg, read at most every 100 ms and cached), else 0 (also when unreadable). For
 * busy-polling that should only take CPU time nobody else wants. Thread-safe. */
int mc_cpus_contended(void);

#endif /* MC_COMMON_PARSE_H */
