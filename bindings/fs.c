// Filesystem calls for the peer tools (share, fetch): stat, lstat, mkdir,
// scandir, rename, unlink, rmdir, realpath, and a no-follow read-only open.
// Synchronous uv_fs calls on local files.
//
// Below the path calls, directory handles (core.fs_opendir): a folder opened
// once, then every name under it reached from its fd, one component at a
// time, never through a symbolic link (openat2 RESOLVE_BENEATH |
// RESOLVE_NO_SYMLINKS where the kernel has it, else openat with O_NOFOLLOW
// | O_DIRECTORY per component). Whoever can write inside the folder cannot
// make a walk, a read or a write escape it by swapping a directory for a
// link between a check and a use. Synchronous like the rest of this file.
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#if defined(__linux__)
#include <linux/openat2.h>
#include <sys/syscall.h>
#endif

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
  ludx_gc_pay(L, (size_t) got);
  return 1;
}

static int
l_close (lua_State *L) {
  int fd = (int) ludx_check_integer(L, 1, "fd", 0, INT32_MAX);
  uv_fs_t req;
  return simple(L, uv_fs_close(NULL, &req, fd, NULL), &req);
}

// ---- directory handles -------------------------------------------------

#define DIR_MT  "ludx.fs.dir"
#define REL_MAX 4096 // bytes of a relative path (share paths: ludx.share.paths)

// Folder fds are only ever used as the base of *at calls: O_PATH where
// there is one (no read permission needed to pass through a folder).
#ifdef O_PATH
#define DIR_FLAGS (O_PATH | O_DIRECTORY | O_CLOEXEC)
#else
#define DIR_FLAGS (O_RDONLY | O_DIRECTORY | O_CLOEXEC)
#endif

typedef struct {
  int fd;
} dirh_t;

#if defined(__linux__) && defined(SYS_openat2)
static int use_openat2 = 1; // cleared for good once the kernel says ENOSYS
#else
static int use_openat2 = 0;
#endif

static void
stat_to_uv (const struct stat *st, uv_stat_t *out) {
  memset(out, 0, sizeof(*out));
  out->st_mode = (uint64_t) st->st_mode;
  out->st_size = (uint64_t) st->st_size;
  out->st_dev = (uint64_t) st->st_dev;
  out->st_ino = (uint64_t) st->st_ino;
#if defined(__APPLE__)
  out->st_mtim.tv_sec = st->st_mtimespec.tv_sec;
  out->st_mtim.tv_nsec = st->st_mtimespec.tv_nsec;
  out->st_ctim.tv_sec = st->st_ctimespec.tv_sec;
  out->st_ctim.tv_nsec = st->st_ctimespec.tv_nsec;
#else
  out->st_mtim.tv_sec = st->st_mtim.tv_sec;
  out->st_mtim.tv_nsec = st->st_mtim.tv_nsec;
  out->st_ctim.tv_sec = st->st_ctim.tv_sec;
  out->st_ctim.tv_nsec = st->st_ctim.tv_nsec;
#endif
}

static void
push_sys_stat (lua_State *L, const struct stat *st) {
  uv_stat_t u;
  stat_to_uv(st, &u);
  push_stat(L, &u);
}

static int
push_errno (lua_State *L, int e) {
  return ludx_push_uv_error(L, uv_translate_sys_error(e));
}

static dirh_t *
check_dir (lua_State *L) {
  return ludx_check_open(L, 1, DIR_MT, "directory handle");
}

// Splits a checked relative path in place: every component a plain name
// (no "", ".", ".." and no leading "/"). Returns the offset of the last
// component, or -1.
static int
split_rel (char *buf, const char *rel, size_t len) {
  if (len == 0 || len >= REL_MAX || memchr(rel, 0, len) != NULL)
    return -1;
  memcpy(buf, rel, len);
  buf[len] = 0;
  size_t start = 0, last = 0;
  for (size_t i = 0; i <= len; i++) {
    if (buf[i] != '/' && buf[i] != 0)
      continue;
    size_t n = i - start;
    if (n == 0 || (n == 1 && buf[start] == '.') || (n == 2 && buf[start] == '.' && buf[start + 1] == '.'))
      return -1;
    last = start;
    start = i + 1;
  }
  return (int) last;
}

// An fd of the directory holding the last component of buf (split by
// split_rel, last at offset `last`), reached from dfd without following a
// link: the fd (the caller closes it unless it is dfd) or -errno.
static int
open_parent (int dfd, char *buf, int last) {
  if (last == 0)
    return dfd;
  buf[last - 1] = 0; // the parent path, for now
  int fd = -1;
#if defined(__linux__) && defined(SYS_openat2)
  if (use_openat2) {
    struct open_how how;
    memset(&how, 0, sizeof(how));
    how.flags = DIR_FLAGS;
    how.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS;
    fd = (int) syscall(SYS_openat2, dfd, buf, &how, sizeof(how));
    if (fd < 0 && errno == ENOSYS)
      use_openat2 = 0; // an older kernel: the component walk below
    else if (fd < 0 && errno != EAGAIN && errno != EPERM) {
      int e = errno;
      buf[last - 1] = '/';
      return -e;
    }
  }
#endif
  if (fd < 0) {
    // one component at a time, none a link (O_NOFOLLOW), each a directory
    int cur = dfd;
    char *c = buf;
    for (;;) {
      char *slash = strchr(c, '/');
      if (slash != NULL)
        *slash = 0;
      int next = openat(cur, c, DIR_FLAGS | O_NOFOLLOW);
      int e = errno;
      if (slash != NULL)
        *slash = '/';
      if (cur != dfd)
        close(cur);
      if (next < 0) {
        buf[last - 1] = '/';
        return -e;
      }
      cur = next;
      if (slash == NULL)
        break;
      c = slash + 1;
    }
    fd = cur;
  }
  buf[last - 1] = '/';
  return fd;
}

static void
close_parent (int pfd, int dfd) {
  if (pfd >= 0 && pfd != dfd)
    close(pfd);
}

// Resolves argument idx (a relative path) under the handle: the parent fd
// and the last component, or pushes nil, msg, code and returns -1 (EINVAL
// for a path that is not a plain relative one).
typedef struct {
  char buf[REL_MAX];
  int pfd;
  const char *name;
} rel_t;

static int
resolve (lua_State *L, dirh_t *d, int idx, const char *argname, rel_t *r) {
  size_t len;
  const char *rel = ludx_check_lstring(L, idx, argname, &len);
  int last = split_rel(r->buf, rel, len);
  if (last < 0) {
    ludx_push_error(L, "not a plain relative path", "EINVAL");
    return -1;
  }
  r->pfd = open_parent(d->fd, r->buf, last);
  if (r->pfd < 0) {
    push_errno(L, -r->pfd);
    return -1;
  }
  r->name = r->buf + last;
  return 0;
}

// Pushes a handle owning fd: 1, or nil, msg, code: 3.
static int
push_dir (lua_State *L, int fd) {
  dirh_t *d = malloc(sizeof(*d));
  if (d == NULL) {
    close(fd);
    return ludx_push_uv_error(L, UV_ENOMEM);
  }
  d->fd = fd;
  ludx_new_object(L, DIR_MT, d);
  return 1;
}

// core.fs_opendir(path) -> directory handle | nil, msg, code. The path is
// the user's: it is followed (a link to a folder is the user's choice);
// nothing below it is.
static int
l_opendir (lua_State *L) {
  const char *path = ludx_check_lstring(L, 1, "path", NULL);
  int fd = open(path, DIR_FLAGS);
  if (fd < 0)
    return push_errno(L, errno);
  return push_dir(L, fd);
}

// d:opendir(rel) -> the handle of a folder under d (no link on the way,
// nor the folder itself).
static int
dir_opendir (lua_State *L) {
  dirh_t *d = check_dir(L);
  rel_t r;
  if (resolve(L, d, 2, "path", &r) < 0)
    return 3;
  int fd = openat(r.pfd, r.name, DIR_FLAGS | O_NOFOLLOW);
  int e = errno;
  close_parent(r.pfd, d->fd);
  if (fd < 0)
    return push_errno(L, e);
  return push_dir(L, fd);
}

// d:list([max]) -> { {name=, type=, size=, ... (as fs_lstat)}, ... } of the
// entries of d itself, unsorted, links not followed | nil, msg, code
// (E2BIG past max entries, default 1048576: a folder someone else fills
// cannot take all memory).
// A DIR* held by a userdata, so a Lua error mid-list (out of memory while
// the entries are pushed) still closes it: __gc closes what is left open.
static int
dirstream_gc (lua_State *L) {
  DIR **box = (DIR **) lua_touserdata(L, 1);
  if (box != NULL && *box != NULL) {
    closedir(*box);
    *box = NULL;
  }
  return 0;
}

static DIR **
push_dirstream (lua_State *L) {
  DIR **box = (DIR **) lua_newuserdata(L, sizeof(DIR *));
  *box = NULL;
  if (luaL_newmetatable(L, "ludx.fs.dirstream")) {
    lua_pushcfunction(L, dirstream_gc);
    lua_setfield(L, -2, "__gc");
  }
  lua_setmetatable(L, -2);
  return box;
}

static void
dirstream_close (DIR **box) {
  closedir(*box);
  *box = NULL;
}

static int
dir_list (lua_State *L) {
  dirh_t *d = check_dir(L);
  lua_Integer max = ludx_opt_integer(L, 2, "max", 1048576, 0, INT32_MAX);
  DIR **box = push_dirstream(L); // before the fd: no error between open and hold
  int fd = openat(d->fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0)
    return push_errno(L, errno);
  DIR *dp = fdopendir(fd);
  if (dp == NULL) {
    int e = errno;
    close(fd);
    return push_errno(L, e);
  }
  *box = dp;
  lua_newtable(L);
  lua_Integer n = 0;
  for (;;) {
    errno = 0;
    struct dirent *ent = readdir(dp);
    if (ent == NULL) {
      if (errno != 0) {
        int e = errno;
        dirstream_close(box);
        return push_errno(L, e);
      }
      break;
    }
    const char *name = ent->d_name;
    if (strcmp(name, ".") == 0 || strcmp(name, "..") == 0)
      continue;
    if (n >= max) {
      dirstream_close(box);
      lua_pushnil(L);
      lua_pushfstring(L, "more than %d entries", (int) max);
      lua_pushliteral(L, "E2BIG");
      return 3;
    }
    struct stat st;
    if (fstatat(d->fd, name, &st, AT_SYMLINK_NOFOLLOW) != 0)
      continue; // gone since readdir
    push_sys_stat(L, &st);
    lua_pushstring(L, name);
    lua_setfield(L, -2, "name");
    lua_rawseti(L, -2, (int) ++n);
  }
  dirstream_close(box);
  return 1;
}

// d:lstat(rel) -> stat of rel itself (a link is "link") | nil, msg, code
static int
dir_lstat (lua_State *L) {
  dirh_t *d = check_dir(L);
  rel_t r;
  if (resolve(L, d, 2, "path", &r) < 0)
    return 3;
  struct stat st;
  int rc = fstatat(r.pfd, r.name, &st, AT_SYMLINK_NOFOLLOW);
  int e = errno;
  close_parent(r.pfd, d->fd);
  if (rc != 0)
    return push_errno(L, e);
  push_sys_stat(L, &st);
  return 1;
}

static int
open_checked (lua_State *L, int fd, int e) {
  if (fd < 0)
    return push_errno(L, e);
  struct stat st;
  int rc = fstat(fd, &st);
  if (rc != 0 || !S_ISREG(st.st_mode)) {
    e = rc != 0 ? errno : EINVAL; // a regular file only (no FIFO, device)
    close(fd);
    return push_errno(L, e);
  }
  lua_pushinteger(L, fd);
  push_sys_stat(L, &st);
  return 2;
}

// Read-only file access that never follows a symbolic link (share serves
// only regular files inside its root): core.fs_open_read(path) -> fd, stat
// of the open file | nil, msg, code (ELOOP for a link, EINVAL when it is not
// a regular file). O_NONBLOCK so a FIFO swapped in cannot block the loop.
static int
l_open_read (lua_State *L) {
  const char *path = ludx_check_lstring(L, 1, "path", NULL);
  int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  return open_checked(L, fd, errno);
}

// d:open_read(rel) -> fd, stat | nil, msg, code: as core.fs_open_read, with
// no link anywhere below d (ELOOP or ENOTDIR for one).
static int
dir_open_read (lua_State *L) {
  dirh_t *d = check_dir(L);
  rel_t r;
  if (resolve(L, d, 2, "path", &r) < 0)
    return 3;
  int fd = openat(r.pfd, r.name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  int e = errno;
  close_parent(r.pfd, d->fd);
  return open_checked(L, fd, e);
}

// d:open_write(rel [, create_mode]) -> fd, stat | nil, msg, code: a regular
// file opened for writing (made when absent, with create_mode, default
// 0644), never through a link.
static int
dir_open_write (lua_State *L) {
  dirh_t *d = check_dir(L);
  int mode = (int) ludx_opt_integer(L, 3, "mode", 0644, 0, 07777);
  rel_t r;
  if (resolve(L, d, 2, "path", &r) < 0)
    return 3;
  int fd = openat(r.pfd, r.name, O_WRONLY | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, mode);
  int e = errno;
  close_parent(r.pfd, d->fd);
  return open_checked(L, fd, e);
}

// d:mkdir(rel [, mode]) -> true | nil, msg, code (EEXIST included)
static int
dir_mkdir (lua_State *L) {
  dirh_t *d = check_dir(L);
  int mode = (int) ludx_opt_integer(L, 3, "mode", 0755, 0, 07777);
  rel_t r;
  if (resolve(L, d, 2, "path", &r) < 0)
    return 3;
  int rc = mkdirat(r.pfd, r.name, (mode_t) mode);
  int e = errno;
  close_parent(r.pfd, d->fd);
  if (rc != 0)
    return push_errno(L, e);
  lua_pushboolean(L, 1);
  return 1;
}

// d:unlink(rel [, dir]) -> true | nil, msg, code; dir: remove a folder
static int
dir_unlink (lua_State *L) {
  dirh_t *d = check_dir(L);
  int flags = lua_toboolean(L, 3) ? AT_REMOVEDIR : 0;
  rel_t r;
  if (resolve(L, d, 2, "path", &r) < 0)
    return 3;
  int rc = unlinkat(r.pfd, r.name, flags);
  int e = errno;
  close_parent(r.pfd, d->fd);
  if (rc != 0)
    return push_errno(L, e);
  lua_pushboolean(L, 1);
  return 1;
}

// d:rename(from_rel, to_rel) -> true | nil, msg, code. Both under d; a link
// at to_rel is replaced, never followed (rename never follows the last name).
static int
dir_rename (lua_State *L) {
  dirh_t *d = check_dir(L);
  rel_t from, to;
  ludx_check_lstring(L, 3, "to", NULL); // raises before an fd is open
  if (resolve(L, d, 2, "from", &from) < 0)
    return 3;
  if (resolve(L, d, 3, "to", &to) < 0) {
    close_parent(from.pfd, d->fd);
    return 3;
  }
  int rc = renameat(from.pfd, from.name, to.pfd, to.name);
  int e = errno;
  close_parent(from.pfd, d->fd);
  close_parent(to.pfd, d->fd);
  if (rc != 0)
    return push_errno(L, e);
  lua_pushboolean(L, 1);
  return 1;
}

static int
dir_close (lua_State *L) {
  void **ud = lua_touserdata(L, 1);
  ludx_check_object(L, 1, DIR_MT, "self");
  dirh_t *d = *ud;
  if (d != NULL) {
    close(d->fd);
    free(d);
    *ud = NULL;
  }
  return 0;
}

// core.fs_pwrite(fd, bytes, offset) -> true | nil, msg, code (all of it)
static int
l_pwrite (lua_State *L) {
  int fd = (int) ludx_check_integer(L, 1, "fd", 0, INT32_MAX);
  size_t len;
  const char *data = ludx_check_lstring(L, 2, "bytes", &len);
  lua_Integer off = ludx_check_integer(L, 3, "offset", 0, (lua_Integer) 1 << 53);
  size_t done = 0;
  while (done < len) {
    uv_buf_t b = uv_buf_init((char *) data + done, (unsigned int) (len - done));
    uv_fs_t req;
    int r = uv_fs_write(NULL, &req, fd, &b, 1, off + (lua_Integer) done, NULL);
    uv_fs_req_cleanup(&req);
    if (r < 0)
      return ludx_push_uv_error(L, r);
    if (r == 0) // no progress: an error, not a loop
      return ludx_push_uv_error(L, UV_EIO);
    done += (size_t) r;
  }
  lua_pushboolean(L, 1);
  return 1;
}

// core.fs_ftruncate(fd, size) -> true | nil, msg, code
static int
l_ftruncate (lua_State *L) {
  int fd = (int) ludx_check_integer(L, 1, "fd", 0, INT32_MAX);
  lua_Integer size = ludx_check_integer(L, 2, "size", 0, (lua_Integer) 1 << 52);
  uv_fs_t req;
  return simple(L, uv_fs_ftruncate(NULL, &req, fd, size, NULL), &req);
}

// core.fs_openat2([on]) -> whether handles resolve with openat2. Tests turn
// it off to run the component walk on a kernel that has openat2.
static int
l_openat2 (lua_State *L) {
#if defined(__linux__) && defined(SYS_openat2)
  if (!lua_isnoneornil(L, 1))
    use_openat2 = ludx_check_boolean(L, 1, "on");
#endif
  lua_pushboolean(L, use_openat2);
  return 1;
}

void
ludx_bind_fs (lua_State *L) {
  static const luaL_Reg dir_methods[] = {
      {"opendir", dir_opendir},
      {"list", dir_list},
      {"lstat", dir_lstat},
      {"open_read", dir_open_read},
      {"open_write", dir_open_write},
      {"mkdir", dir_mkdir},
      {"unlink", dir_unlink},
      {"rename", dir_rename},
      {"close", dir_close},
      {"__gc", dir_close},
      {NULL, NULL}};
  ludx_new_class(L, DIR_MT, dir_methods);
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
      {"fs_opendir", l_opendir},
      {"fs_pwrite", l_pwrite},
      {"fs_ftruncate", l_ftruncate},
      {"fs_openat2", l_openat2},
      {NULL, NULL}};
  ludx_set_funcs(L, funcs);
}
