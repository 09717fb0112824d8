/* byoc_pool.c: the thread pool of the parallel loops of a generated module (shipped with
   byoc, generator/c/support/; declared in byoc_module.h).

   byoc_parallel_for(body, args, count) runs body(args, begin, end) over [0, count) in at
   most BYOC_CHUNKS chunks. The calling thread and the helper threads claim chunks from one
   shared word, generation << 32 | next chunk, advanced by compare-and-swap: the caller runs
   every chunk no helper claimed, and waits only for chunks a helper claimed and is still
   running, never for a helper that has not started. A helper that wakes after its job is
   over finds the generation changed, or no chunk left, and sleeps again: it never touches
   a later job. Each chunk is [c * count / chunks, (c + 1) * count / chunks): every iteration
   runs exactly once, and computes what it computes serially, so the results are the same bits.
   Helpers are persistent POSIX threads started by the first parallel loop: one fewer than
   the online CPUs, or than $BYOC_NUM_THREADS or else $OMP_NUM_THREADS when that is smaller
   (1: no helper). Idle helpers block on a condition variable. A loop runs serially in the
   calling thread when the pool is taken by another thread's loop (a try-lock; this also
   covers nested calls), in a child process forked from the one that loaded the library
   (the helpers do not exist there, and the pool's mutexes may be in any state), and when
   no helper could start. When the library is unloaded, a destructor stops and joins the
   helpers, so no thread runs code of an unmapped library. */
#if !defined(_POSIX_C_SOURCE)
#define _POSIX_C_SOURCE 200112L /* POSIX threads, getpid() and sysconf() */
#endif
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include "byoc_module.h"

/* The most chunks a parallel loop is cut into: enough that a late helper still finds work
   and a preempted one holds up the caller by at most 1/32 of the loop, few enough that each
   chunk is long against the cost of claiming it (one compare-and-swap). */
#define BYOC_CHUNKS 32
#define BYOC_MAX_HELPERS 63

/* The process that loaded the library: a forked child runs its loops serially. */
static pid_t byoc_loader_pid;
__attribute__((constructor)) static void byoc_record_loader_pid(void) {
  byoc_loader_pid = getpid();
}
#define byoc_parallel_ok() (getpid() == byoc_loader_pid)

static pthread_mutex_t byoc_pool_lock = PTHREAD_MUTEX_INITIALIZER;  /* guards the job and the helpers' state */
static pthread_cond_t byoc_pool_wake = PTHREAD_COND_INITIALIZER;    /* helpers sleep here for a new job */
static pthread_cond_t byoc_pool_done = PTHREAD_COND_INITIALIZER;    /* the caller sleeps here for running chunks */
static pthread_mutex_t byoc_pool_owner = PTHREAD_MUTEX_INITIALIZER; /* held by the thread whose loop runs */
static pthread_t byoc_pool_helper[BYOC_MAX_HELPERS];
static int byoc_pool_helpers = 0;       /* helpers running */
static int byoc_pool_started = 0;       /* 1 once the first parallel loop started the helpers */
static int byoc_pool_stop = 0;          /* 1 when the library is being unloaded */
static uint32_t byoc_pool_generation = 0; /* the current job's number */
static byoc_body_t byoc_pool_body;      /* the current job: body, args, count, chunks */
static void* byoc_pool_args;
static int64_t byoc_pool_count;
static int64_t byoc_pool_chunks;
static uint64_t byoc_pool_next = 0;     /* atomic: generation << 32 | the next unclaimed chunk */
static int64_t byoc_pool_finished = 0;  /* atomic: chunks of the current job finished */

/* Claims a chunk of job `generation`: 1 with its index in *chunk, or 0 when the job has no
   chunk left or is over. */
static int byoc_pool_claim(uint32_t generation, int64_t chunks, int64_t* chunk) {
  uint64_t word = __atomic_load_n(&byoc_pool_next, __ATOMIC_ACQUIRE);
  for (;;) {
    if ((uint32_t)(word >> 32) != generation || (int64_t)(word & 0xffffffffu) >= chunks) {
      return 0;
    }
    if (__atomic_compare_exchange_n(&byoc_pool_next, &word, word + 1, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
      *chunk = (int64_t)(word & 0xffffffffu);
      return 1;
    }
  }
}

/* Runs chunks of job `generation` until none is left; the last one finished wakes the caller. */
static void byoc_pool_run(uint32_t generation, byoc_body_t body, void* args, int64_t count, int64_t chunks) {
  int64_t c;
  while (byoc_pool_claim(generation, chunks, &c)) {
    body(args, c * count / chunks, (c + 1) * count / chunks);
    if (__atomic_add_fetch(&byoc_pool_finished, 1, __ATOMIC_ACQ_REL) == chunks) {
      pthread_mutex_lock(&byoc_pool_lock);
      pthread_cond_signal(&byoc_pool_done);
      pthread_mutex_unlock(&byoc_pool_lock);
    }
  }
}

/* A helper thread: sleeps until a new job (or the unload) and helps with it. */
static void* byoc_pool_work(void* unused) {
  uint32_t seen;
  (void)unused;
  pthread_mutex_lock(&byoc_pool_lock);
  seen = byoc_pool_generation;
  for (;;) {
    while (!byoc_pool_stop && byoc_pool_generation == seen) {
      pthread_cond_wait(&byoc_pool_wake, &byoc_pool_lock);
    }
    if (byoc_pool_stop) {
      break;
    }
    {
      const byoc_body_t body = byoc_pool_body;
      void* const args = byoc_pool_args;
      const int64_t count = byoc_pool_count;
      const int64_t chunks = byoc_pool_chunks;
      seen = byoc_pool_generation;
      pthread_mutex_unlock(&byoc_pool_lock);
      byoc_pool_run(seen, body, args, count, chunks);
      pthread_mutex_lock(&byoc_pool_lock);
    }
  }
  pthread_mutex_unlock(&byoc_pool_lock);
  return NULL;
}

/* Starts the helpers (under byoc_pool_lock), with every signal blocked: signals go to the
   process's own threads. */
static void byoc_pool_start(void) {
  long threads = sysconf(_SC_NPROCESSORS_ONLN);
  const char* env = getenv("BYOC_NUM_THREADS");
  sigset_t all;
  sigset_t old;
  if (env == NULL || *env == '\0') {
    env = getenv("OMP_NUM_THREADS");
  }
  if (env != NULL && *env != '\0') {
    const long wanted = strtol(env, NULL, 10);
    if (wanted >= 1 && wanted < threads) {
      threads = wanted;
    }
  }
  byoc_pool_started = 1;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  while (byoc_pool_helpers + 1 < threads && byoc_pool_helpers < BYOC_MAX_HELPERS) {
    if (pthread_create(&byoc_pool_helper[byoc_pool_helpers], NULL, byoc_pool_work, NULL) != 0) {
      break;
    }
    ++byoc_pool_helpers;
  }
  pthread_sigmask(SIG_SETMASK, &old, NULL);
}

BYOC_WEAK void byoc_parallel_for(byoc_body_t body, void* args, int64_t count) {
  const int64_t chunks = count < BYOC_CHUNKS ? count : BYOC_CHUNKS;
  uint32_t generation;
  if (chunks < 2 || !byoc_parallel_ok() || pthread_mutex_trylock(&byoc_pool_owner) != 0) {
    body(args, 0, count);
    return;
  }
  pthread_mutex_lock(&byoc_pool_lock);
  if (!byoc_pool_started) {
    byoc_pool_start();
  }
  if (byoc_pool_helpers == 0 || byoc_pool_stop) {
    pthread_mutex_unlock(&byoc_pool_lock);
    pthread_mutex_unlock(&byoc_pool_owner);
    body(args, 0, count);
    return;
  }
  generation = ++byoc_pool_generation;
  byoc_pool_body = body;
  byoc_pool_args = args;
  byoc_pool_count = count;
  byoc_pool_chunks = chunks;
  __atomic_store_n(&byoc_pool_finished, 0, __ATOMIC_RELAXED);
  __atomic_store_n(&byoc_pool_next, (uint64_t)generation << 32, __ATOMIC_RELEASE);
  pthread_cond_broadcast(&byoc_pool_wake);
  pthread_mutex_unlock(&byoc_pool_lock);
  byoc_pool_run(generation, body, args, count, chunks);
  if (__atomic_load_n(&byoc_pool_finished, __ATOMIC_ACQUIRE) != chunks) {
    pthread_mutex_lock(&byoc_pool_lock);
    while (__atomic_load_n(&byoc_pool_finished, __ATOMIC_ACQUIRE) != chunks) {
      pthread_cond_wait(&byoc_pool_done, &byoc_pool_lock);
    }
    pthread_mutex_unlock(&byoc_pool_lock);
  }
  pthread_mutex_unlock(&byoc_pool_owner);
}

/* The library is unloaded (or the process exits): stop and join the helpers. A forked
   child has none of them. */
__attribute__((destructor)) static void byoc_pool_unload(void) {
  int i;
  if (byoc_pool_helpers == 0 || !byoc_parallel_ok()) {
    return;
  }
  pthread_mutex_lock(&byoc_pool_lock);
  byoc_pool_stop = 1;
  pthread_cond_broadcast(&byoc_pool_wake);
  pthread_mutex_unlock(&byoc_pool_lock);
  for (i = 0; i < byoc_pool_helpers; ++i) {
    pthread_join(byoc_pool_helper[i], NULL);
  }
  byoc_pool_helpers = 0;
}
