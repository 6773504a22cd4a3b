/*
 * proc.h — starting and stopping real child processes in integration tests.
 *
 * mc_proc_start() runs argv with stdin and stdout on pipes (stderr inherited, so the child's log
 * shows in the test output) and reads the child's stdout until a line starting with `ready_prefix`
 * appears (or timeout_ms passes). Not a test double: these are the real programs.
 */
#ifndef MC_TEST_PROC_H
#define MC_TEST_PROC_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/wait.h>

typedef struct mc_proc {
    pid_t pid;
    int stdin_fd;  /* write end of the child's stdin; closing it is EOF for the child */
    int stdout_fd; /* read end of the child's stdout */
    char ready_line[1024];
} mc_proc_t;

/* 0 when the child printed its ready line; -1 otherwise (the child is killed and reaped). */
int mc_proc_start(mc_proc_t *p, char *const argv[], const char *ready_prefix, int timeout_ms);
/*
 * Like mc_proc_start, for programs whose ready line is a log line on stderr: the child's stderr
 * goes to the file `log_path` (created or truncated; read it afterwards for the whole log) and
 * the child is ready once a line containing `ready_marker` appears there. p->ready_line receives
 * that line. Returns -1 (child killed and reaped) on timeout or when the child exits first.
 */
int mc_proc_start_logged(mc_proc_t *p, char *const argv[], const char *log_path,
                         const char *ready_marker, int timeout_ms);
/* Sends sig and waits up to timeout_ms; returns the wait status, or -1 on timeout (then SIGKILL).
 */
int mc_proc_stop(mc_proc_t *p, int sig, int timeout_ms);
/* 1 when a wait status says the child exited normally with code 0 (not killed by a signal, not
 * the -1 of a stop that timed out): WIFEXITED before WEXITSTATUS. */
static inline int mc_clean_exit(int status)
{
    return status != -1 && WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

/*
 * Stops a process (SIGSTOP) and returns only once it *is* stopped: kill() returns before the
 * target's threads have stopped (a worker thread was seen running 8.7 ms after it), so a test
 * that acts on "stopped" right after kill() may be acting on a process still serving. Waits
 * until every thread of pid (any process, child or not) is in state 'T' in
 * /proc/PID/task/TID/stat, up to timeout_ms. 0 when stopped; -1 when it died, could not be
 * signalled or did not stop in time (then the caller's test should fail, not pass vacuously).
 */
int mc_proc_freeze(pid_t pid, int timeout_ms);
/* 1 when every thread of pid is in state 'T' now, 0 when one is not, -1 when pid is gone. */
int mc_proc_is_frozen(pid_t pid);
/* Resumes a process stopped by mc_proc_freeze (SIGCONT); 0, or -1 when it cannot be signalled. */
int mc_proc_thaw(pid_t pid);

/* Another process's memory (process_vm_readv; the caller needs ptrace rights over pid, as root
 * has). The target may be running or stopped. */
/* Reads len bytes at addr of pid; 0, or -1 when any of them cannot be read. */
int mc_proc_peek(pid_t pid, uint64_t addr, void *out, size_t len);
/* The mapping of pid (a line of /proc/PID/maps) that contains addr: [*start, *start + *len);
 * 0, or -1 when none does. */
int mc_proc_mapping_of(pid_t pid, uint64_t addr, uint64_t *start, uint64_t *len);
/* How many aligned 8-byte words of [start, start + len) in pid equal one of probe[0..nprobe):
 * a search of a process's memory for any trace of a value. -1 when the range cannot be read. */
long long mc_proc_count_words(pid_t pid, uint64_t start, uint64_t len, const uint64_t *probe,
                              size_t nprobe);

/* Writes `line` to the child's stdin; 0, or -1 when it could not be written whole. */
int mc_proc_send(mc_proc_t *p, const char *line);
/* Reads one line (without its newline) of the child's stdout into out[0..cap), waiting up to
 * timeout_ms; 0, or -1 on timeout or end of output. */
int mc_proc_read_line(mc_proc_t *p, char *out, size_t cap, int timeout_ms);
/* A free TCP port on 127.0.0.1 (bound then released), chosen below the kernel's range for
 * outgoing connections' source ports, so that it stays free for a server restarted on it.
 * Not thread-safe (one seed per process). */
int mc_test_free_port(void);

/* ---- raw sockets: the tests that play a peer byte by byte -------------------------------------
 */

/* A TCP connection to host:port (connect bounded by 5 s) with SO_RCVTIMEO/SO_SNDTIMEO of
 * io_timeout_ms (0: none). The fd, or -1 when refused, unreachable or timed out. */
int mc_test_connect(const char *host, int port, int io_timeout_ms);
/* The same from source address `from` (bound first: a second peer address on one host), with no
 * I/O timeouts. The fd, or -1. */
int mc_test_connect_from(const char *from, const char *host, int port);

#endif
