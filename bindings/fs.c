// Filesystem calls for the peer tools (share, fetch): stat, lstat, mkdir,
// scandir, rename, unlink, rmdir, realpath, and a no-follow read-only open.
// Synchronous uv_fs calls on local files.
#include <stdlib.h>
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

// Pushes a stat table: {type=, size=, mtime=, ctime= (ns), mode=, dev=, ino=}.
static void
push_stat (lua_State *L, const uv_stat_t *st) {
  lua_createtable(L, 0, 7);
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
  lua_pushnumber(L, (lua_Number) st->st_ctim.tv_sec * 1e9 + (lua_Number) st->st_ctim.tv_nsec);
  lua_setfield(L, -2, "ctime"); // ns: a file replaced since it was hashed has another
  lua_pushinteger(L, (lua_Integer) (st->st_mode & 07777));
  lua_setfield(L, -2, "mode");
  // dev and ino tell "the file served is the file hashed" (share)
  lua_pushnumber(L, (lua_Number) st->st_dev);
  lua_setfield(L, -2, "dev");
  lua_pushnumber(L, (lua_Number) st->st_ino);
  lua_setfield(L, -2, "ino");
}

static int
stat_path (lua_State *L, int follow) {
  const char *path = ludx_check_lstring(L, 1, "path", NULL);
  uv_fs_t req;
  int r = follow ? uv_fs_stat(NULL, &req, path, NULL) : uv_fs_lstat(NULL, &req, path, NULL);
  int n = fs_result(L, &req, r);
  if (n >= 0)
    return n;
  push_stat(L, &req.statbuf);
  uv_fs_req_cleanup(&req);
  return 1;
}

// core.fs_stat(path) -> {type=, size=, mtime=, mode=, dev=, ino=} | nil, msg, code
static int
l_stat (lua_State *L) {
  return stat_path(L, 1);
}

// core.fs_lstat(path): as fs_stat, but a symbolic link is "link"
static int
l_lstat (lua_State *L) {
  return stat_path(L, 0);
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

// Read-only file access that never follows a symbolic link (share serves
// only regular files inside its root): core.fs_open_read(path) -> fd, stat
// of the open file | nil, msg, code (ELOOP for a link, EINVAL when it is not
// a regular file). O_NONBLOCK so a FIFO swapped in cannot block the loop.
static int
l_open_read (lua_State *L) {
  const char *path = ludx_check_lstring(L, 1, "path", NULL);
  uv_fs_t req;
  int fd = uv_fs_open(NULL, &req, path, UV_FS_O_RDONLY | UV_FS_O_NOFOLLOW | UV_FS_O_NONBLOCK, 0, NULL);
  uv_fs_req_cleanup(&req);
  if (fd < 0)
    return ludx_push_uv_error(L, fd);
  int r = uv_fs_fstat(NULL, &req, fd, NULL);
  if (r < 0 || !S_ISREG(req.statbuf.st_mode)) {
    uv_fs_req_cleanup(&req);
    uv_fs_close(NULL, &req, fd, NULL);
    uv_fs_req_cleanup(&req);
    return ludx_push_uv_error(L, r < 0 ? r : UV_EINVAL);
  }
  lua_pushinteger(L, fd);
  push_stat(L, &req.statbuf);
  uv_fs_req_cleanup(&req);
  return 2;
}

// core.fs_pread(fd, length, offset) -> bytes (shorter at the end, "" past
// it) | nil, msg, code. One read into one buffer, then one copy to Lua.
static int
l_pread (lua_State *L) {
  int fd = (int) ludx_check_integer(L, 1, "fd", 0, INT32_MAX);
  lua_Integer len = ludx_check_integer(L, 2, "length", 0, 16 * 1024 * 1024);
  lua_Integer off = ludx_check_integer(L, 3, "offset", 0, (lua_Integer) 1 << 53);
  char *buf = malloc(len > 0 ? (size_t) len : 1);
  if (buf == NULL)
    return ludx_push_uv_error(L, UV_ENOMEM);
  lua_Integer got = 0;
  while (got < len) {
    uv_buf_t b = uv_buf_init(buf + got, (unsigned int) (len - got));
    uv_fs_t req;
    int r = uv_fs_read(NULL, &req, fd, &b, 1, off + got, NULL);
    uv_fs_req_cleanup(&req);
    if (r < 0) {
      free(buf);
      return ludx_push_uv_error(L, r);
    }
    if (r == 0)
      break;
    got += r;
  }
  lua_pushlstring(L, buf, (size_t) got);
  free(buf);
  return 1;
}

static int
l_close (lua_State *L) {
  int fd = (int) ludx_check_integer(L, 1, "fd", 0, INT32_MAX);
  uv_fs_t req;
  return simple(L, uv_fs_close(NULL, &req, fd, NULL), &req);
}

void
ludx_bind_fs (lua_State *L) {
  static const luaL_Reg funcs[] = {
      {"fs_stat", l_stat},
      {"fs_lstat", l_lstat},
      {"fs_open_read", l_open_read},
      {"fs_pread", l_pread},
      {"fs_close", l_close},
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
