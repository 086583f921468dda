/* np_error_set (include/nestpipe/nestpipe.h): np_err for code outside the library, such as
 * a user layer's shape function or a driver. */
#include <stdarg.h>
#include <stdio.h>

#include "nestpipe/nestpipe.h"

np_status np_error_set(np_error *err, np_status status, const char *fmt, ...) {
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err->msg, sizeof err->msg, fmt, ap);
        va_end(ap);
    }
    return status;
}
