/*
 * store_client_buffers.c — the user buffers registered for the zero-copy calls (upstream's
 * register_buffer): each is registered with the Transfer Engine and recorded here, so a
 * zero-copy put or get is refused before any byte moves when a buffer lies outside them; and
 * whether this store may do I/O at all (a pure server may not).
 */
#include "store_client_internal.h"

#include "log.h"

#include <stdlib.h>

static int buffer_registered(mc_real_client_t *s, const void *p, size_t len)
{
    uintptr_t a = (uintptr_t)p;
    int ok = 0;
    pthread_rwlock_rdlock(&s->buffers_lock);
    for (size_t i = 0; i < s->buffer_count && !ok; i++) {
        const mc_buffer_range_t *b = &s->buffers[i];
        ok = a >= b->addr && len <= b->length && a - b->addr <= b->length - len;
    }
    pthread_rwlock_unlock(&s->buffers_lock);
    if (!ok)
        MC_ERROR("buffer %p (+%zu) is not inside a registered buffer", p, len);
    return ok;
}

int mc_real_register_buffer(void *impl, void *buf, size_t size)
{
    mc_real_client_t *s = impl;
    int rc = mc_te_register_memory(s->te, buf, size);
    if (rc != 0)
        return rc;
    pthread_rwlock_wrlock(&s->buffers_lock);
    if (s->buffer_count == s->buffer_capacity) {
        size_t cap = s->buffer_capacity ? s->buffer_capacity * 2 : 8;
        mc_buffer_range_t *nb = realloc(s->buffers, cap * sizeof(*nb));
        if (!nb) {
            pthread_rwlock_unlock(&s->buffers_lock);
            mc_te_unregister_memory(s->te, buf);
            return MC_ERR_INTERNAL_ERROR;
        }
        s->buffers = nb;
        s->buffer_capacity = cap;
    }
    s->buffers[s->buffer_count++] = (mc_buffer_range_t){(uintptr_t)buf, size};
    pthread_rwlock_unlock(&s->buffers_lock);
    return 0;
}

int mc_real_unregister_buffer(void *impl, void *buf)
{
    mc_real_client_t *s = impl;
    int rc = MC_ERR_INVALID_PARAMS;
    pthread_rwlock_wrlock(&s->buffers_lock);
    for (size_t i = 0; i < s->buffer_count; i++) {
        if (s->buffers[i].addr == (uintptr_t)buf) {
            s->buffers[i] = s->buffers[--s->buffer_count];
            rc = 0;
            break;
        }
    }
    pthread_rwlock_unlock(&s->buffers_lock);
    if (rc == 0)
        rc = mc_te_unregister_memory(s->te, buf);
    return rc;
}

int mc_real_check_registered_all(mc_real_client_t *s, const void *const *bufs, const size_t *sizes,
                                 size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (sizes[i] > 0 && !buffer_registered(s, bufs[i], sizes[i]))
            return MC_ERR_INVALID_PARAMS;
    }
    return 0;
}

/*
 * A store with local_buffer_size 0 is a pure server: it refuses the put and get family, unless it
 * serves dummies (mc_store_allow_zero_copy_io: every byte is then in the dummies' memory). The
 * call then writes nothing and reads nothing: every results[i] says so.
 */
int mc_real_refuses_io(const mc_real_client_t *s)
{
    if (s->local_buffer_size > 0 || s->zero_copy_io)
        return 0;
    MC_ERROR("this store has local_buffer_size 0: it is a pure server and cannot put or get");
    return 1;
}
