/*
 * failpoint.h — named fault-injection points for tests (real processes, no mocks).
 *
 * A failpoint is a named place in the code, e.g. "get.after_lookup". It does nothing unless the
 * environment variable MC_FAILPOINTS names it when the process first reaches a failpoint:
 *
 *   MC_FAILPOINTS="get.after_lookup=stop"           raise SIGSTOP in the calling thread's process
 *                                                   (a test waits for the stopped state with
 *                                                   waitpid(WUNTRACED), injects its faults, then
 *                                                   sends SIGCONT)
 *   MC_FAILPOINTS="offload.fetch=sleep:3000"       sleep 3000 ms
 *   MC_FAILPOINTS="a=stop,b=sleep:10"              several, comma-separated
 *   MC_FAILPOINTS="get.after_lookup=stop:1"         ":N" after stop fires only the first N times
 *
 * Names in use (grep mc_failpoint): see docs/ARCHITECTURE.md "Fault injection". The list is parsed
 * once per process; an unknown name is ignored. Thread-safe. Costs one relaxed atomic load when
 * MC_FAILPOINTS is unset.
 */
#ifndef MC_COMMON_FAILPOINT_H
#define MC_COMMON_FAILPOINT_H

/* Runs the action configured for `name`, if any. Returns 1 when an action ran, else 0. */
int mc_failpoint(const char *name);
/* mc_failpoint("<prefix>.<suffix>"), e.g. ("rpc.held_reply", "UpsertEnd"): the name is built only
 * when MC_FAILPOINTS names any failpoint, so a hot path pays one relaxed load otherwise. */
int mc_failpoint_named(const char *prefix, const char *suffix);

#endif
