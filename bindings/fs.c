// Filesystem metadata for the peer tools (share, fetch): stat, mkdir,
// scandir, rename, unlink, rmdir, realpath. Synchronous uv_fs calls: they
// touch local metadata only; file contents go through Lua's io library.
#include <string.h>

#include "bind.h"

static int
fs_result (lua_State *L, uv_fs_t *req, int r) {
  if (r < 0) {
    uv_fs_req_cleanup(req);
    return ludx_push_uv_error(L, r);
  }
  return -1;
}

// core.fs_stat(path) -> {type=, size=, mtime=, mode=} | nil, msg, code
static int
l_stat (lua_State *L) {
  const char *path = ludx_check_lstring(L, 1, "path", NULL);
  uv_fs_t req;
  int r = uv_fs_stat(NULL, &req, path, NULL);
  int n = fs_result(L, &req, r);
  if (n >= 0)
    return n;
  uv_stat_t *st = &req.statbuf;
  lua_createtable(L, 0, 4);
  const char *type = "other";
  if (S_ISREG(st->st_mode))
    type = "file";
  else if (S_ISDIR(st->st_mode))
    type = "directory";
  else if (S_ISLNK(st->st_mode))
    type = "link";
  lua_pushstring(L, type);
  lua_setfield(L, -2, "type");
  lua_pushnumber(L, (lua_Number) st->st_size);
  lua_setfield(L, -2, "size");
  lua_pushnumber(L, (lua_Number) st->st_mtim.tv_sec + st->st_mtim.tv_nsec / 1e9);
  lua_setfield(L, -2, "mtime");
  lua_pushinteger(L, (lua_Integer) (st->st_mode & 07777));
  lua_setfield(L, -2, "mode");
  uv_fs_req_cleanup(&req);
  return 1;
}

// core.fs_scandir(path) -> { {name=, type=}, ... } sorted by name
static int
l_scandir (lua_State *L) {
  const char *path = ludx_check_lstring(L, 1, "path", NULL);
  uv_fs_t req;
  int r = uv_fs_scandir(NULL, &req, path, 0, NULL);
  int n = fs_result(L, &req, r);
  if (n >= 0)
    return n;
  lua_newtable(L);
  uv_dirent_t ent;
  int i = 0;
  while (uv_fs_scandir_next(&req, &ent) != UV_EOF) {
    lua_createtable(L, 0, 2);
    lua_pushstring(L, ent.name);
    lua_setfield(L, -2, "name");
    lua_pushstring(L, ent.type == UV_DIRENT_DIR ? "directory" : ent.type == UV_DIRENT_FILE ? "file"
                                                            : ent.type == UV_DIRENT_LINK   ? "link"
                                                                                           : "other");
    lua_setfield(L, -2, "type");
    lua_rawseti(L, -2, ++i);
  }
  uv_fs_req_cleanup(&req);
  return 1;
}

static int
simple (lua_State *L, int r, uv_fs_t *req) {
  uv_fs_req_cleanup(req);
  if (r < 0)
    return ludx_push_uv_error(L, r);
  lua_pushboolean(L, 1);
  return 1;
}

// core.fs_mkdir(path [, mode]) -> true | nil, msg, code (EEXIST included)
static int
l_mkdir (lua_State *L) {
  const char *path = ludx_check_lstring(L, 1, "path", NULL);
  int mode = (int) ludx_opt_integer(L, 2, "mode", 0755, 0, 07777);
  uv_fs_t req;
  return simple(L, uv_fs_mkdir(NULL, &req, path, mode, NULL), &req);
}

static int
l_rename (lua_State *L) {
  const char *from = ludx_check_lstring(L, 1, "from", NULL);
  const char *to = ludx_check_lstring(L, 2, "to", NULL);
  uv_fs_t req;
  return simple(L, uv_fs_rename(NULL, &req, from, to, NULL), &req);
}

static int
l_unlink (lua_State *L) {
  const char *path = ludx_check_lstring(L, 1, "path", NULL);
  uv_fs_t req;
  return simple(L, uv_fs_unlink(NULL, &req, path, NULL), &req);
}

static int
l_rmdir (lua_State *L) {
  const char *path = ludx_check_lstring(L, 1, "path", NULL);
  uv_fs_t req;
  return simple(L, uv_fs_rmdir(NULL, &req, path, NULL), &req);
}

static int
l_realpath (lua_State *L) {
  const char *path = ludx_check_lstring(L, 1, "path", NULL);
  uv_fs_t req;
  int r = uv_fs_realpath(NULL, &req, path, NULL);
  int n = fs_result(L, &req, r);
  if (n >= 0)
    return n;
  lua_pushstring(L, req.ptr);
  uv_fs_req_cleanup(&req);
  return 1;
}

// core.fs_truncate(path, size)
static int
l_truncate (lua_State *L) {
  const char *path = ludx_check_lstring(L, 1, "path", NULL);
  lua_Integer size = ludx_check_integer(L, 2, "size", 0, (lua_Integer) 1 << 52);
  uv_fs_t req;
  int fd = uv_fs_open(NULL, &req, path, UV_FS_O_WRONLY, 0, NULL);
  uv_fs_req_cleanup(&req);
  if (fd < 0)
    return ludx_push_uv_error(L, fd);
  int r = uv_fs_ftruncate(NULL, &req, fd, size, NULL);
  uv_fs_req_cleanup(&req);
  uv_fs_close(NULL, &req, fd, NULL);
  return simple(L, r, &req);
}

void
ludx_bind_fs (lua_State *L) {
  static const luaL_Reg funcs[] = {
      {"fs_stat", l_stat},
      {"fs_scandir", l_scandir},
      {"fs_mkdir", l_mkdir},
      {"fs_rename", l_rename},
      {"fs_unlink", l_unlink},
      {"fs_rmdir", l_rmdir},
      {"fs_realpath", l_realpath},
      {"fs_truncate", l_truncate},
      {NULL, NULL}};
  ludx_set_funcs(L, funcs);
}
