// On the include path of the sans-IO engine (udx_engine) and of what is
// built on it alone (the simulated-time tests, the fuzz targets): any
// inclusion of libuv there is a build error, so the boundary is checked by
// the compiler, not by review.
#error "the UDX engine is sans-IO: it must not include libuv (uv.h)"
