#include "udx.h"

const char *
udx_version_string (void) {
  return "0.1.0";
}
