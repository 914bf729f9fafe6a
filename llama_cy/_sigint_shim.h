/* Install and restore a SIGINT handler, portably (llama_cy._sigint).
 *
 * POSIX has sigaction, whose saved state restores the old handler exactly (flags and
 * mask included). Windows has only the C standard's signal(), which returns the old
 * handler: that is what is saved and put back there. */
#pragma once

#include <signal.h>
#include <string.h>

typedef void (*lcy_sigint_handler)(int);

#ifdef _WIN32
typedef struct {
    lcy_sigint_handler handler;
} lcy_sigint_saved;

/* The handler now in place, without changing it. */
static inline lcy_sigint_handler lcy_sigint_current(void) {
    lcy_sigint_handler old = signal(SIGINT, SIG_IGN);
    signal(SIGINT, old);
    return old;
}

static inline void lcy_sigint_install(lcy_sigint_handler handler, lcy_sigint_saved *saved) {
    saved->handler = signal(SIGINT, handler);
}

static inline void lcy_sigint_restore(const lcy_sigint_saved *saved) {
    signal(SIGINT, saved->handler);
}
#else
typedef struct {
    struct sigaction action;
} lcy_sigint_saved;

static inline lcy_sigint_handler lcy_sigint_current(void) {
    struct sigaction now;
    sigaction(SIGINT, NULL, &now);
    return now.sa_handler;
}

static inline void lcy_sigint_install(lcy_sigint_handler handler, lcy_sigint_saved *saved) {
    struct sigaction act;
    memset(&act, 0, sizeof(act));
    act.sa_handler = handler;
    sigemptyset(&act.sa_mask);
    sigaction(SIGINT, &act, &saved->action);
}

static inline void lcy_sigint_restore(const lcy_sigint_saved *saved) {
    sigaction(SIGINT, &saved->action, NULL);
}
#endif

/* SIG_IGN as a value Cython can compare with. */
static inline int lcy_sigint_ignored(lcy_sigint_handler h) { return h == SIG_IGN; }
