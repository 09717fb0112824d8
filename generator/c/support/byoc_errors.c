/* byoc_errors.c: what a failing kernel or init of a generated module says (shipped with
   byoc, generator/c/support/; declared in byoc_module.h).

   A kernel whose macro says `status: true`, a helper of the prelude it calls, or the
   spec's init or module_init may say why it fails just before it returns non-zero:
     return byoc_error("negative input %g at index %lld", (double)a[k], (long long)k);
   (a printf format; byoc_error returns 1). The call then raises RuntimeError naming the
   kernel and its node, followed by "; it says: " and the message (at most 255 bytes).
   The message is kept per thread, so concurrent calls never see each other's: in a
   __thread buffer (a gcc and clang extension, since C99 has no thread-local storage;
   a buffer passed to every kernel would change the guide's kernel signatures). Each
   call of a function with such kernels clears it first, so a message never outlives
   the call that set it. */
#include <stdarg.h>
#include <stdio.h>

#include "byoc_module.h"

BYOC_WEAK __thread char byoc_error_message_[256];

BYOC_WEAK int byoc_error(const char* format, ...) {
  va_list args;
  va_start(args, format);
  vsnprintf(byoc_error_message_, sizeof byoc_error_message_, format, args);
  va_end(args);
  return 1;
}

BYOC_WEAK int byoc_raise_failure(const char* what, const char* message) {
  char text[1024];
  if (message[0] == '\0') {
    TVMFFIErrorSetRaisedFromCStr("RuntimeError", what);
  } else {
    snprintf(text, sizeof text, "%s; it says: %s", what, message);
    TVMFFIErrorSetRaisedFromCStr("RuntimeError", text);
  }
  return -1;
}
