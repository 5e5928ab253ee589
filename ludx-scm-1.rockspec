rockspec_format = "3.0"
package = "ludx"
version = "scm-1"
source = {
  url = "git+file://.",
}
description = {
  summary = "A Lua-scriptable networking runtime: UDX streams, SecretStream, HyperDHT",
  detailed = [[
    UDX reliable, congestion-controlled streams over UDP in C (libuv),
    SecretStream encryption (libsodium) and a HyperDHT-compatible DHT,
    scripted from LuaJIT with tasks over the libuv loop.
  ]],
  license = "MIT",
}
dependencies = {
  "lua == 5.1",
}
external_dependencies = {
  LIBUV = { header = "uv.h" },
  LIBSODIUM = { header = "sodium.h" },
}
build = {
  -- The same CMake build as `make`; it installs ludx/core.so into LIBDIR and
  -- lua/ludx into LUADIR. It needs nothing from the network.
  type = "cmake",
  variables = {
    CMAKE_BUILD_TYPE = "Release",
    CMAKE_INSTALL_PREFIX = "$(PREFIX)",
    LUDX_LUADIR = "$(LUADIR)",
    LUDX_LIBDIR = "$(LIBDIR)",
    LUDX_ROCK = "ON",
  },
}
