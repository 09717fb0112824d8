/* byoc_workspace.c: the per-thread workspace of the intermediate buffers of a generated
   module's bodies (shipped with byoc, generator/c/support/; declared in byoc_module.h).

   Each thread that calls a function of the library gets one block, kept between calls and
   grown when a function needs more; it is freed when the thread exits, and every block is
   freed when the library is unloaded. Calls never lock: the mutex guards only the list of
   blocks, when a thread's block is created, grown or freed. */
#include <pthread.h>
#include <stdlib.h>

#include "byoc_module.h"

typedef struct byoc_workspace_t {
  struct byoc_workspace_t* prev;
  struct byoc_workspace_t* next;
  size_t bytes; /* usable bytes at data */
  char* data;   /* 64-byte aligned, inside this allocation */
} byoc_workspace_t;

static pthread_key_t byoc_workspace_key;
static pthread_once_t byoc_workspace_once = PTHREAD_ONCE_INIT;
static int byoc_workspace_status = -1; /* pthread_key_create's result; 0 when the key exists */
static pthread_mutex_t byoc_workspace_lock = PTHREAD_MUTEX_INITIALIZER;
static byoc_workspace_t* byoc_workspace_all = NULL; /* every thread's block */

/* Take `ws` out of the list; the caller holds the lock. */
static void byoc_workspace_unlink(byoc_workspace_t* ws) {
  if (ws->prev != NULL) ws->prev->next = ws->next;
  else byoc_workspace_all = ws->next;
  if (ws->next != NULL) ws->next->prev = ws->prev;
}

/* The key's destructor: a thread that exits frees its block. */
static void byoc_workspace_at_thread_exit(void* block) {
  pthread_mutex_lock(&byoc_workspace_lock);
  byoc_workspace_unlink((byoc_workspace_t*)block);
  pthread_mutex_unlock(&byoc_workspace_lock);
  free(block);
}

static void byoc_workspace_make_key(void) {
  byoc_workspace_status = pthread_key_create(&byoc_workspace_key, byoc_workspace_at_thread_exit);
}

/* A new block of `bytes` usable bytes (not in the list), or NULL. */
static byoc_workspace_t* byoc_workspace_new(size_t bytes) {
  byoc_workspace_t* fresh;
  if (bytes > (size_t)-1 - sizeof(byoc_workspace_t) - 64) return NULL;
  fresh = (byoc_workspace_t*)malloc(sizeof(byoc_workspace_t) + 64 + bytes);
  if (fresh == NULL) return NULL;
  fresh->bytes = bytes;
  fresh->data = (char*)(((uintptr_t)(fresh + 1) + 63) & ~(uintptr_t)63);
  fresh->prev = NULL;
  fresh->next = NULL;
  return fresh;
}

/* When allocation fails the thread keeps the block it had. A process has PTHREAD_KEYS_MAX
   keys: with about a thousand libraries loaded at once, a library may find none left. */
BYOC_WEAK char* byoc_workspace(size_t bytes, void** spare) {
  byoc_workspace_t* ws;
  byoc_workspace_t* fresh;
  if (pthread_once(&byoc_workspace_once, byoc_workspace_make_key) != 0 || byoc_workspace_status != 0) {
    fresh = byoc_workspace_new(bytes);
    *spare = fresh;
    return fresh != NULL ? fresh->data : NULL;
  }
  ws = (byoc_workspace_t*)pthread_getspecific(byoc_workspace_key);
  if (ws != NULL && ws->bytes >= bytes) return ws->data;
  fresh = byoc_workspace_new(bytes);
  if (fresh == NULL) return NULL;
  if (pthread_setspecific(byoc_workspace_key, fresh) != 0) {
    free(fresh);
    return NULL;
  }
  pthread_mutex_lock(&byoc_workspace_lock);
  if (ws != NULL) byoc_workspace_unlink(ws);
  fresh->next = byoc_workspace_all;
  if (fresh->next != NULL) fresh->next->prev = fresh;
  byoc_workspace_all = fresh;
  pthread_mutex_unlock(&byoc_workspace_lock);
  free(ws);
  return fresh->data;
}

/* At unload: delete the key first, so that no thread that exits later runs the destructor
   of an unloaded library, then free every thread's block. */
static void byoc_workspace_unload(void) __attribute__((destructor));
static void byoc_workspace_unload(void) {
  byoc_workspace_t* ws;
  if (byoc_workspace_status == 0) pthread_key_delete(byoc_workspace_key);
  pthread_mutex_lock(&byoc_workspace_lock);
  while ((ws = byoc_workspace_all) != NULL) {
    byoc_workspace_unlink(ws);
    free(ws);
  }
  pthread_mutex_unlock(&byoc_workspace_lock);
}
