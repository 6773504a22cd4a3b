/*
 * log.c — glog-style log lines (see log.h).
 *
 * Formatting happens into a stack buffer and the finished line goes out with a single write(2) per
 * sink, which is what keeps concurrent threads' lines whole; no lock is held while formatting.
 */
#include "log.h"

#include "clock.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#define MC_LOG_LINE_MAX 4096

static _Atomic int log_level = -1; /* -1: not yet read from MC_LOG_LEVEL */
static _Atomic int log_verbosity = -1;
static _Atomic int log_to_stderr = 1;
static _Atomic int log_fd = -1;

static int level_from_env(void)
{
    const char *s = getenv("MC_LOG_LEVEL");
    if (!s || !*s)
        return MC_LOG_INFO;
    if (!strcasecmp(s, "INFO") || !strcmp(s, "0"))
        return MC_LOG_INFO;
    if (!strcasecmp(s, "WARNING") || !strcasecmp(s, "WARN") || !strcmp(s, "1"))
        return MC_LOG_WARNING;
    if (!strcasecmp(s, "ERROR") || !strcmp(s, "2"))
        return MC_LOG_ERROR;
    return MC_LOG_INFO;
}

mc_log_level_t mc_log_get_level(void)
{
    int l = atomic_load_explicit(&log_level, memory_order_relaxed);
    if (l < 0) {
        l = level_from_env();
        atomic_store(&log_level, l);
    }
    return (mc_log_level_t)l;
}

void mc_log_set_level(mc_log_level_t level)
{
    atomic_store(&log_level, (int)level);
}

int mc_log_get_verbosity(void)
{
    int v = atomic_load_explicit(&log_verbosity, memory_order_relaxed);
    if (v < 0) {
        const char *s = getenv("MC_LOG_VERBOSITY");
        v = s ? atoi(s) : 0;
        if (v < 0)
            v = 0;
        atomic_store(&log_verbosity, v);
    }
    return v;
}

void mc_log_set_verbosity(int v)
{
    atomic_store(&log_verbosity, v < 0 ? 0 : v);
}

void mc_log_set_stderr(int enabled)
{
    atomic_store(&log_to_stderr, enabled ? 1 : 0);
}

int mc_log_set_file(const char *path)
{
    int fd = -1;
    if (path) {
        fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
        if (fd < 0)
            return -errno;
    }
    int old = atomic_exchange(&log_fd, fd);
    if (old >= 0)
        close(old);
    return 0;
}

static void write_all(int fd, const char *buf, size_t len)
{
    while (len > 0) {
        ssize_t n = write(fd, buf, len);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return;
        }
        buf += n;
        len -= (size_t)n;
    }
}

int mc_log_ratelimit(atomic_uint_fast64_t *last_ms, uint64_t interval_ms)
{
    uint64_t now = mc_now_ms() + 1; /* never 0 */
    uint64_t last = atomic_load(last_ms);
    if (last && now - last < interval_ms)
        return 0;
    return atomic_compare_exchange_strong(last_ms, &last, now);
}

void mc_log_vwrite(mc_log_level_t level, const char *file, int line, const char *fmt, va_list ap)
{
    static const char letters[] = "IWEF";
    char buf[MC_LOG_LINE_MAX];
    struct timeval tv;
    struct tm tm;
    int saved_errno = errno;

    gettimeofday(&tv, NULL);
    localtime_r(&tv.tv_sec, &tm);
    int n = snprintf(buf, sizeof(buf), "%c%02d%02d %02d:%02d:%02d.%06ld %ld %s:%d] ",
                     letters[level & 3], tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min,
                     tm.tm_sec, (long)tv.tv_usec, (long)syscall(SYS_gettid), file, line);
    if (n < 0)
        n = 0;
    if ((size_t)n < sizeof(buf) - 1) {
        int m = vsnprintf(buf + n, sizeof(buf) - 1 - (size_t)n, fmt, ap);
        if (m > 0)
            n += m;
    }
    if ((size_t)n > sizeof(buf) - 2)
        n = (int)sizeof(buf) - 2;
    buf[n++] = '\n';

    if (atomic_load_explicit(&log_to_stderr, memory_order_relaxed) || level >= MC_LOG_ERROR)
        write_all(STDERR_FILENO, buf, (size_t)n);
    int fd = atomic_load_explicit(&log_fd, memory_order_relaxed);
    if (fd >= 0)
        write_all(fd, buf, (size_t)n);
    errno = saved_errno;
    if (level == MC_LOG_FATAL)
        abort();
}

void mc_log_write(mc_log_level_t level, const char *file, int line, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    mc_log_vwrite(level, file, line, fmt, ap);
    va_end(ap);
}
