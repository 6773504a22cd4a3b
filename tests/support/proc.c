/*
 * proc.c — child-process helpers for the integration tests (proc.h).
 */
#include "proc.h"

#include "net.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

static long long now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000LL + ts.tv_nsec / 1000000;
}

int mc_proc_start(mc_proc_t *p, char *const argv[], const char *ready_prefix, int timeout_ms)
{
    int in[2], out[2];
    memset(p, 0, sizeof(*p));
    p->pid = -1;
    if (pipe2(in, O_CLOEXEC) || pipe2(out, O_CLOEXEC))
        return -1;
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, in[0], STDIN_FILENO);
    posix_spawn_file_actions_adddup2(&fa, out[1], STDOUT_FILENO);
    int rc = posix_spawn(&p->pid, argv[0], &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    close(in[0]);
    close(out[1]);
    p->stdin_fd = in[1];
    p->stdout_fd = out[0];
    if (rc != 0) {
        fprintf(stderr, "cannot start %s: %s\n", argv[0], strerror(rc));
        close(in[1]);
        close(out[0]);
        p->pid = -1;
        return -1;
    }
    size_t used = 0;
    long long deadline = now_ms() + timeout_ms;
    while (now_ms() < deadline) {
        struct pollfd pfd = {.fd = p->stdout_fd, .events = POLLIN};
        if (poll(&pfd, 1, 100) <= 0)
            continue;
        ssize_t n = read(p->stdout_fd, p->ready_line + used, sizeof(p->ready_line) - 1 - used);
        if (n <= 0)
            break;
        used += (size_t)n;
        p->ready_line[used] = '\0';
        char *line = p->ready_line;
        for (char *nl; (nl = strchr(line, '\n')) != NULL; line = nl + 1) {
            if (!strncmp(line, ready_prefix, strlen(ready_prefix))) {
                *nl = '\0';
                memmove(p->ready_line, line, strlen(line) + 1);
                return 0;
            }
        }
        if (used == sizeof(p->ready_line) - 1)
            used = 0;
    }
    fprintf(stderr, "%s did not print \"%s\" in time\n", argv[0], ready_prefix);
    mc_proc_stop(p, SIGKILL, 5000);
    return -1;
}

/* Copies the first line of `text` containing `marker` into out; 1 when there is one. */
static int find_marked_line(const char *text, const char *marker, char *out, size_t cap)
{
    const char *m = strstr(text, marker);
    if (!m)
        return 0;
    const char *eol = strchr(m, '\n');
    if (!eol)
        return 0; /* the line is still being written */
    const char *bol = m;
    while (bol > text && bol[-1] != '\n')
        bol--;
    size_t n = (size_t)(eol - bol) < cap - 1 ? (size_t)(eol - bol) : cap - 1;
    memcpy(out, bol, n);
    out[n] = '\0';
    return 1;
}

int mc_proc_start_logged(mc_proc_t *p, char *const argv[], const char *log_path,
                         const char *ready_marker, int timeout_ms)
{
    int in[2], out[2];
    memset(p, 0, sizeof(*p));
    p->pid = -1;
    int log_fd = open(log_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (log_fd < 0) {
        fprintf(stderr, "cannot create %s: %s\n", log_path, strerror(errno));
        return -1;
    }
    if (pipe2(in, O_CLOEXEC) || pipe2(out, O_CLOEXEC)) {
        close(log_fd);
        return -1;
    }
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, in[0], STDIN_FILENO);
    posix_spawn_file_actions_adddup2(&fa, out[1], STDOUT_FILENO);
    posix_spawn_file_actions_adddup2(&fa, log_fd, STDERR_FILENO);
    int rc = posix_spawn(&p->pid, argv[0], &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    close(in[0]);
    close(out[1]);
    close(log_fd);
    p->stdin_fd = in[1];
    p->stdout_fd = out[0];
    if (rc != 0) {
        fprintf(stderr, "cannot start %s: %s\n", argv[0], strerror(rc));
        close(in[1]);
        close(out[0]);
        p->pid = -1;
        return -1;
    }
    const size_t cap = 1 << 20;
    char *text = malloc(cap);
    if (!text) {
        mc_proc_stop(p, SIGKILL, 5000);
        return -1;
    }
    long long deadline = now_ms() + timeout_ms;
    while (now_ms() < deadline) {
        FILE *f = fopen(log_path, "r");
        size_t n = f ? fread(text, 1, cap - 1, f) : 0;
        if (f)
            fclose(f);
        text[n] = '\0';
        if (find_marked_line(text, ready_marker, p->ready_line, sizeof(p->ready_line))) {
            free(text);
            return 0;
        }
        int status;
        if (waitpid(p->pid, &status, WNOHANG) == p->pid) {
            fprintf(stderr, "%s exited before printing \"%s\"; its log:\n%s\n", argv[0],
                    ready_marker, text);
            close(p->stdin_fd);
            close(p->stdout_fd);
            p->pid = -1;
            free(text);
            return -1;
        }
        usleep(20000);
    }
    free(text);
    fprintf(stderr, "%s did not log \"%s\" in time\n", argv[0], ready_marker);
    mc_proc_stop(p, SIGKILL, 5000);
    return -1;
}

int mc_proc_stop(mc_proc_t *p, int sig, int timeout_ms)
{
    if (p->pid <= 0)
        return -1;
    kill(p->pid, sig);
    long long deadline = now_ms() + timeout_ms;
    int status = -1;
    for (;;) {
        pid_t r = waitpid(p->pid, &status, WNOHANG);
        if (r == p->pid)
            break;
        if (now_ms() > deadline) {
            kill(p->pid, SIGKILL);
            waitpid(p->pid, &status, 0);
            status = -1;
            break;
        }
        usleep(10000);
    }
    close(p->stdin_fd);
    close(p->stdout_fd);
    p->pid = -1;
    return status;
}

/* [lo, hi]: the kernel's range for the source ports of outgoing connections. */
static void local_port_range(int *lo, int *hi)
{
    *lo = 32768;
    *hi = 60999;
    FILE *f = fopen("/proc/sys/net/ipv4/ip_local_port_range", "r");
    if (f) {
        if (fscanf(f, "%d %d", lo, hi) != 2) {
            *lo = 32768;
            *hi = 60999;
        }
        fclose(f);
    }
}

/* Whether port can be bound on 127.0.0.1 now (no SO_REUSEADDR: a TIME_WAIT socket counts). */
static int port_bindable(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return 0;
    struct sockaddr_in sin = {.sin_family = AF_INET,
                              .sin_port = htons((uint16_t)port),
                              .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    int ok = bind(fd, (struct sockaddr *)&sin, sizeof(sin)) == 0;
    close(fd);
    return ok;
}

int mc_test_free_port(void)
{
    /* Outside the kernel's source-port range: a port chosen there can be taken by any outgoing
     * connection once released, and a test that restarts a server on the same port (an etcd
     * member, a master) then finds it in use. Ports below the range are only ever taken by an
     * explicit bind. Random, so that parallel tests rarely pick the same one. */
    static unsigned seed;
    if (!seed)
        seed = (unsigned)getpid() * 2654435761u ^ (unsigned)now_ms();
    int lo, hi;
    local_port_range(&lo, &hi);
    int first = 10000, last = lo - 1; /* below the range */
    if (last - first < 1000) {        /* a range that starts low: above it instead */
        first = hi + 1;
        last = 65535;
    }
    for (int tries = 0; last - first >= 1000 && tries < 500; tries++) {
        int port = first + (int)(rand_r(&seed) % (unsigned)(last - first + 1));
        if (port_bindable(port))
            return port;
    }
    /* No room outside the range: any free port the kernel picks. */
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sin = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t sl = sizeof(sin);
    if (fd < 0 || bind(fd, (struct sockaddr *)&sin, sizeof(sin)) != 0 ||
        getsockname(fd, (struct sockaddr *)&sin, &sl) != 0) {
        if (fd >= 0)
            close(fd);
        return -1;
    }
    close(fd);
    return ntohs(sin.sin_port);
}

int mc_proc_send(mc_proc_t *p, const char *line)
{
    size_t n = strlen(line);
    return write(p->stdin_fd, line, n) == (ssize_t)n ? 0 : -1;
}

int mc_proc_read_line(mc_proc_t *p, char *out, size_t cap, int timeout_ms)
{
    size_t n = 0;
    long long deadline = now_ms() + timeout_ms;
    while (n + 1 < cap) {
        struct pollfd pfd = {.fd = p->stdout_fd, .events = POLLIN};
        long long now = now_ms();
        if (now >= deadline)
            return -1;
        if (poll(&pfd, 1, (int)(deadline - now)) <= 0)
            continue;
        char c;
        if (read(p->stdout_fd, &c, 1) != 1)
            return -1;
        if (c == '\n')
            break;
        out[n++] = c;
    }
    out[n] = '\0';
    return 0;
}

/* The state letter of one task: the field after the ")" that closes the command name (which
 * may itself contain spaces or parentheses); 0 when the task is gone. */
static char task_state(pid_t pid, const char *tid)
{
    char path[320], buf[512];
    snprintf(path, sizeof(path), "/proc/%d/task/%s/stat", (int)pid, tid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    ssize_t n = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    if (n <= 0)
        return 0;
    buf[n] = '\0';
    char *rp = strrchr(buf, ')');
    return rp && rp[1] == ' ' ? rp[2] : 0;
}

int mc_proc_is_frozen(pid_t pid)
{
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
    DIR *d = opendir(path);
    if (!d)
        return -1;
    int frozen = 1, tasks = 0, zombie_main = 0;
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        if (e->d_name[0] == '.')
            continue;
        char st = task_state(pid, e->d_name);
        if (st == 0 || st == 'X')
            continue; /* the thread exited meanwhile */
        tasks++;
        if (st == 'Z' && atoi(e->d_name) == (int)pid)
            zombie_main = 1;
        else if (st != 'T' && st != 'Z')
            frozen = 0;
    }
    closedir(d);
    return tasks == 0 || (zombie_main && tasks == 1) ? -1 : frozen;
}

int mc_proc_freeze(pid_t pid, int timeout_ms)
{
    if (pid <= 0 || kill(pid, SIGSTOP) != 0)
        return -1;
    long long deadline = now_ms() + timeout_ms;
    for (;;) {
        int f = mc_proc_is_frozen(pid);
        if (f == 1)
            return 0;
        if (f < 0 || now_ms() > deadline) {
            fprintf(stderr, "process %d did not stop within %d ms\n", (int)pid, timeout_ms);
            return -1;
        }
        usleep(1000);
    }
}

int mc_proc_thaw(pid_t pid)
{
    return pid > 0 && kill(pid, SIGCONT) == 0 ? 0 : -1;
}

int mc_proc_peek(pid_t pid, uint64_t addr, void *out, size_t len)
{
    size_t done = 0;
    while (done < len) {
        struct iovec l = {(char *)out + done, len - done};
        struct iovec r = {(void *)(uintptr_t)(addr + done), len - done};
        ssize_t n = process_vm_readv(pid, &l, 1, &r, 1, 0);
        if (n <= 0)
            return -1;
        done += (size_t)n;
    }
    return 0;
}

int mc_proc_mapping_of(pid_t pid, uint64_t addr, uint64_t *start, uint64_t *len)
{
    char path[64], line[512];
    snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    int found = 0;
    while (!found && fgets(line, sizeof(line), f)) {
        unsigned long long a, b;
        if (sscanf(line, "%llx-%llx", &a, &b) == 2 && addr >= a && addr < b) {
            *start = a;
            *len = b - a;
            found = 1;
        }
    }
    fclose(f);
    return found ? 0 : -1;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

long long mc_proc_count_words(pid_t pid, uint64_t start, uint64_t len, const uint64_t *probe,
                              size_t nprobe)
{
    /* Sorted probe words, searched per word of memory: a 64 MiB segment against 512 probes
     * is 8 M binary searches, not 4 G comparisons (which took minutes on a loaded 2-core host). */
    const size_t chunk = 4u << 20;
    uint64_t *buf = malloc(chunk), *sorted = malloc((nprobe ? nprobe : 1) * sizeof(uint64_t));
    if (!buf || !sorted) {
        free(buf);
        free(sorted);
        return -1;
    }
    memcpy(sorted, probe, nprobe * sizeof(uint64_t));
    qsort(sorted, nprobe, sizeof(uint64_t), cmp_u64);
    long long hits = 0;
    for (uint64_t off = 0; off < len; off += chunk) {
        size_t n = len - off < chunk ? (size_t)(len - off) : chunk;
        if (mc_proc_peek(pid, start + off, buf, n) != 0) {
            free(buf);
            free(sorted);
            return -1;
        }
        for (size_t i = 0; i < n / 8; i++) {
            size_t lo = 0, hi = nprobe;
            while (lo < hi) {
                size_t mid = lo + (hi - lo) / 2;
                if (sorted[mid] < buf[i])
                    lo = mid + 1;
                else
                    hi = mid;
            }
            for (size_t k = lo; k < nprobe && sorted[k] == buf[i]; k++)
                hits++; /* each equal probe word counts, as before */
        }
    }
    free(buf);
    free(sorted);
    return hits;
}

int mc_test_connect(const char *host, int port, int io_timeout_ms)
{
    int fd = mc_net_connect_tcp(host, port, 5000);
    if (fd < 0)
        return -1;
    mc_net_set_timeouts(fd, io_timeout_ms);
    return fd;
}

int mc_test_connect_from(const char *from, const char *host, int port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in src = {.sin_family = AF_INET},
                       dst = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    if (fd < 0 || inet_pton(AF_INET, from, &src.sin_addr) != 1 ||
        inet_pton(AF_INET, host, &dst.sin_addr) != 1 ||
        bind(fd, (struct sockaddr *)&src, sizeof(src)) != 0 ||
        connect(fd, (struct sockaddr *)&dst, sizeof(dst)) != 0) {
        if (fd >= 0)
            close(fd);
        return -1;
    }
    return fd;
}
