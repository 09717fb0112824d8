"""The per-thread workspace of generated C modules: intermediate buffers allocated once,
not on every call.

A body that needs intermediate buffers (the ``c_source`` kind's, and a ``c_fused``
body with anchors) asks :data:`SUPPORT`'s ``byoc_workspace(bytes)`` for one block and
places every buffer at a fixed, 64-byte aligned offset in it (:func:`layout`). The
block belongs to the calling thread (a ``pthread`` key created under
``pthread_once``) and is kept between calls, so a repeated call allocates nothing and
touches no fresh pages. It grows when a function of the module needs more than the
thread holds; it is freed when the thread exits (the key's destructor) and, for every
thread at once, when the library is unloaded (a destructor that deletes the key, so
no thread runs a destructor of an unloaded library afterwards, and frees every block
from the module's list). Calls from several threads each use their own block: no lock
on the call path; the list's mutex is taken only when a thread's block is created,
grown or freed. A process has about a thousand thread-specific keys, and a loaded
library keeps its key; a library that finds none left allocates a block per call
(``spare``, freed by the body), so it is slower, never wrong.

A failed allocation returns NULL and the body its existing failure status, which the
wrapper raises as ``MemoryError``. The text is C99 (POSIX threads), warning-free
under ``-Wall -Wextra -Werror``.
"""

from __future__ import annotations

from collections.abc import Sequence

from byoc.ir import C_TYPES, TensorType

from .text import comment

ALIGN = 64
"""Every buffer starts at a multiple of this many bytes of the block (a cache line,
and the widest vector load)."""

NAMES = (
    "byoc_workspace_t",
    "byoc_workspace_key",
    "byoc_workspace_once",
    "byoc_workspace_status",
    "byoc_workspace_lock",
    "byoc_workspace_all",
    "byoc_workspace_unlink",
    "byoc_workspace_at_thread_exit",
    "byoc_workspace_make_key",
    "byoc_workspace_new",
    "byoc_workspace",
    "byoc_workspace_unload",
)
"""The names :data:`SUPPORT` defines, which no generated name may take."""


SUPPORT = r"""/* ---- The per-thread workspace of the bodies' intermediate buffers (byoc generator/c/workspace.py) ----
   Each thread that calls a function of this library gets one block, kept between calls and
   grown when a function needs more; it is freed when the thread exits, and every block is
   freed when the library is unloaded. Calls never lock: the mutex guards only the list of
   blocks, when a thread's block is created, grown or freed. */
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

/* The calling thread's block of at least `bytes` bytes, or NULL when it cannot be allocated
   (the thread keeps the block it had). When the process has no thread-specific key left
   for this library (PTHREAD_KEYS_MAX: about a thousand libraries loaded at once), the
   block is this call's own: *spare holds it, and the caller frees it after the call. */
static char* byoc_workspace(size_t bytes, void** spare) {
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
"""
"""The workspace helper; a module includes it (and :data:`~byoc.generator.c.text.PTHREAD_INCLUDE`) when a body uses it."""


def layout(buffers: Sequence[tuple[str, TensorType, str, int]], failure: str) -> list[str]:
    """A body's first lines: its workspace of one thread, and each buffer's pointer into it.

    ``buffers`` gives each buffer's C name, type, a note of what it holds, and its slot:
    buffers of one slot (values whose lifetimes do not overlap, by the memory plan,
    and so of one dtype and size) share their bytes. ``failure`` is the statement that
    ends the body when the workspace cannot be had. The body ends with :data:`RELEASE`.
    """
    offsets: dict[int, int] = {}
    end = 0
    for _, t, _, slot in buffers:
        if slot not in offsets:
            offsets[slot] = end
            end += -(-t.nbytes // ALIGN) * ALIGN
    note = f"{len(offsets)} buffer(s), {end} bytes of this thread's workspace, kept between calls"
    lines = [
        f"  void* spare = NULL; {comment('set only when this call had to allocate a workspace of its own')}",
        f"  char* const ws = byoc_workspace({end}, &spare); {comment(note)}",
        f"  if (ws == NULL) {failure}",
    ]
    for name, t, holds, slot in buffers:
        ctype = C_TYPES[t.dtype]
        lines.append(f"  {ctype}* const {name} = ({ctype}*)(ws + {offsets[slot]}); {comment(holds)}")
    return lines


RELEASE = "  free(spare);"
"""The last statement of a body that used :func:`layout`, on every path after it."""
