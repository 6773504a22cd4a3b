/*
 * log.h — glog-style logging for every mooncake-c process and library.
 *
 * A line reads `I1130 03:29:20.123456 12345 tcp_transport.c:88] message`: level letter, month/day,
 * wall time with microseconds, thread id, file:line, message — the shape users of upstream
 * Mooncake (glog) already grep for. Lines go to stderr, and also to a file when mc_log_set_file()
 * was called (the programs' --log_dir). A line is written with one write(2), so lines of concurrent
 * threads never interleave.
 *
 * Levels: INFO < WARNING < ERROR < FATAL. MC_LOG_LEVEL (env: INFO|WARNING|ERROR, default INFO)
 * sets the minimum. MC_VLOG(n, ...) prints at INFO when n <= the verbosity (--v /
 * MC_LOG_VERBOSITY). FATAL logs then aborts. Thread-safe.
 */
#ifndef MC_COMMON_LOG_H
#define MC_COMMON_LOG_H

#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>

typedef enum mc_log_level {
    MC_LOG_INFO = 0,
    MC_LOG_WARNING = 1,
    MC_LOG_ERROR = 2,
    MC_LOG_FATAL = 3,
} mc_log_level_t;

void mc_log_write(mc_log_level_t level, const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
void mc_log_vwrite(mc_log_level_t level, const char *file, int line, const char *fmt, va_list ap);

/* Minimum level printed; reads MC_LOG_LEVEL on first use. */
void mc_log_set_level(mc_log_level_t level);
mc_log_level_t mc_log_get_level(void);
/* Verbosity for MC_VLOG (glog's --v). */
void mc_log_set_verbosity(int v);
int mc_log_get_verbosity(void);
/* Also append every line to `path` (opened O_APPEND). NULL stops. Returns 0 or -errno. */
int mc_log_set_file(const char *path);
/* 0 silences stderr (only the file gets lines); default 1. */
void mc_log_set_stderr(int enabled);

/*
 * Rate limit for repeated failure lines: 1 when at least interval_ms passed since the last time
 * this returned 1 for the same *last_ms (0 = never), else 0. Lock-free; one caller wins a race.
 */
int mc_log_ratelimit(atomic_uint_fast64_t *last_ms, uint64_t interval_ms);

#define MC_LOG_BASENAME                                                                            \
    (__builtin_strrchr(__FILE__, '/') ? __builtin_strrchr(__FILE__, '/') + 1 : __FILE__)

#define MC_LOG(level, ...)                                                                         \
    do {                                                                                           \
        if ((level) >= mc_log_get_level())                                                         \
            mc_log_write((level), MC_LOG_BASENAME, __LINE__, __VA_ARGS__);                         \
    } while (0)
#define MC_INFO(...) MC_LOG(MC_LOG_INFO, __VA_ARGS__)
#define MC_WARN(...) MC_LOG(MC_LOG_WARNING, __VA_ARGS__)
#define MC_ERROR(...) MC_LOG(MC_LOG_ERROR, __VA_ARGS__)
#define MC_FATAL(...) mc_log_write(MC_LOG_FATAL, MC_LOG_BASENAME, __LINE__, __VA_ARGS__)
#define MC_VLOG(n, ...)                                                                            \
    do {                                                                                           \
        if ((n) <= mc_log_get_verbosity())                                                         \
            mc_log_write(MC_LOG_INFO, MC_LOG_BASENAME, __LINE__, __VA_ARGS__);                     \
    } while (0)

#endif /* MC_COMMON_LOG_H */
