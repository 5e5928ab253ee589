-- luacheck (Debian's lua-check), run by tools/lint and .ci/run.
std = "luajit"
max_line_length = false       -- long lines carry messages and tables; clang-format rules C only
unused_args = false           -- callbacks keep their full signature
exclude_files = { "**/node_modules/**", "build*/**", "docs/types/**" } -- docs/types: LuaLS stubs
files["spec/**"] = { std = "+busted" }
files["tools/spec-unpreload.lua"] = { std = "+busted" }
