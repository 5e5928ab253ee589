-- busted helper for tools/test-asan: the sanitizer runtimes and the
-- sanitized ludx/core.so are preloaded into this LuaJIT only. Children (the
-- ludx executable, Node peers, compilers) must not inherit them.
local ffi = require "ffi"
ffi.cdef "int unsetenv(const char *name);"
ffi.C.unsetenv("LD_PRELOAD")
