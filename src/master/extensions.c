/*
 * extensions.c — the master's extension table (extension.h): which subsystems plug into the
 * core, and in which order the core calls their hooks at each event. Adding an extension is its
 * file with one `mc_master_ext_t` plus one row here.
 *
 * The order is behaviour, kept from when the core called each subsystem by name:
 *  1. restore — its reservations in a just-mounted segment come before anything that could
 *     allocate there (offload's link of the segment allocates nothing), and a committed key's
 *     stale restored record goes before the commit is journaled;
 *  2. tasks — a task that fails in its sweep can end an offload task (replica_lost) before
 *     offload's sweep walks the leases;
 *  3. promotion — its state hangs off an object's offload state: a discarded value's promotion
 *     is cancelled, and promotion's sweep and fini run, before offload frees that state;
 *  4. offload.
 * Hooks of one event that touch disjoint state may run in any order, and for these the table's
 * order differs from the one the calls by name had: a segment's unmount reaches restore before
 * promotion (each drops only the extents it holds there); a mount reaches restore before offload
 * (revival reads no offload state of the segment); a regrown record reaches promotion's back
 * pointer before offload's; stats fill disjoint fields; tasks are set up before offload's
 * sequence numbers (neither reads the other).
 */
#include "extension.h"

const mc_master_ext_t *const mc_master_extensions[] = {
    &mc_restore_extension,
    &mc_tasks_extension,
    &mc_promotion_extension,
    &mc_offload_extension,
    NULL,
};
