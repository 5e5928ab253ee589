// Shutdown at exit is bounded: with everything closed it returns; a close
// that takes a while is waited for; a handle nobody closes is named on
// stderr and the process ends with status 1 instead of hanging.
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <uv.h>

#include "rt.h"

#include "check.h"

static void
on_tick (uv_timer_t *t) {
  (void) t;
}

static void
on_done (uv_timer_t *t) {
  uv_close((uv_handle_t *) t, NULL); // a close that takes 100 ms
}

// mode 0: nothing open; 1: a timer closing itself after 100 ms; 2: a
// repeating timer and an idle handle nobody closes
static int
child (int mode) {
  setenv("LUDX_SHUTDOWN_MS", "300", 1);
  ludx_rt_t *rt = ludx_rt_default();
  if (rt == NULL)
    return 3;
  static uv_timer_t t;
  static uv_idle_t idle;
  if (mode == 1) {
    uv_timer_init(&rt->loop, &t);
    uv_timer_start(&t, on_done, 100, 0);
  } else if (mode == 2) {
    uv_timer_init(&rt->loop, &t);
    uv_timer_start(&t, on_tick, 50, 50);
    uv_idle_init(&rt->loop, &idle);
  }
  ludx_rt_shutdown(rt);
  return 0;
}

static int
run (int mode, int *status) {
  fflush(NULL);
  pid_t pid = fork();
  if (pid == 0) {
    alarm(20); // a hang fails the test instead of blocking it
    _exit(child(mode));
  }
  if (pid < 0 || waitpid(pid, status, 0) != pid)
    return -1;
  return 0;
}

int
main (void) {
  int st;
  CHECK(run(0, &st) == 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0);
  CHECK(run(1, &st) == 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0);
  CHECK(run(2, &st) == 0 && WIFEXITED(st) && WEXITSTATUS(st) == 1);
  printf("ok shutdown\n");
  return 0;
}
