/* A training loop from C with the state resident in the session: the
 * parameters and optimizer state are set once, each step moves only the
 * batch in and the loss out (docs/runtime.md, "Resident training state").
 *
 *   tensorc compile examples/mlp.json --train --optimizer adamw --target cpu -o step.tcx
 *   train_resident step.tcx [STEPS]
 *
 * Parameters start from small deterministic values, the optimizer state
 * from zeros; every step trains on the same batch (so the loss falls). The
 * same program runs a cuda artifact: state and batch then live on the GPU
 * (the host buffers here are copied in). Prints the state's names and each
 * step's loss; errors are printed with their status code (exit 1). */
#include "tensorc/tensorc.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int fail(tc_status_t s) {
  fprintf(stderr, "train_resident: error %d: %s\n", (int)tc_status_code(s), tc_status_message(s));
  tc_status_free(s);
  return 1;
}

#define CHECK(call)                                                                                \
  do {                                                                                             \
    tc_status_t s_ = (call);                                                                       \
    if (s_) return fail(s_);                                                                       \
  } while (0)

/* The declared static size of input `name` (state has static sizes). */
static int input_shape(tc_executable_t *exe, const char *name, int64_t *shape, int32_t *rank,
                       tc_element_type_t *dtype) {
  for (int32_t i = 0; i < tc_executable_input_count(exe); ++i) {
    const char *n;
    if (tc_executable_input_info(exe, i, &n, dtype, rank) == NULL && strcmp(n, name) == 0)
      return tc_executable_input_dims(exe, i, shape) == NULL ? 0 : -1;
  }
  return -1;
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: train_resident STEP.tcx [STEPS]\n");
    return 2;
  }
  int steps = argc > 2 ? atoi(argv[2]) : 20;
  tc_runtime_options_t options;
  tc_runtime_options_initialize(&options);
  tc_runtime_t *runtime;
  CHECK(tc_runtime_create(&options, &runtime));
  tc_executable_t *exe;
  CHECK(tc_executable_load(runtime, argv[1], &exe));
  tc_session_t *session;
  CHECK(tc_session_create(exe, &session));

  /* Every state tensor: parameters small and varied, the rest zero. */
  for (int32_t i = 0; i < tc_session_state_count(session); ++i) {
    const char *name = tc_session_state_name(session, i);
    int64_t shape[8];
    int32_t rank = 0;
    tc_element_type_t dtype;
    if (input_shape(exe, name, shape, &rank, &dtype) != 0 || dtype != TC_F32) {
      fprintf(stderr, "train_resident: state '%s' is not an f32 input with static sizes\n", name);
      return 1;
    }
    int64_t n = 1;
    for (int32_t d = 0; d < rank; ++d) n *= shape[d];
    float *v = calloc((size_t)(n ? n : 1), sizeof(float));
    if (!strchr(name, '.') && strcmp(name, "step") != 0)
      for (int64_t k = 0; k < n; ++k) v[k] = (float)(0.05 * sin(0.37 * (double)k + (double)i));
    tc_tensor_t t = {.dtype = TC_F32, .rank = rank, .shape = shape, .data = v};
    CHECK(tc_session_set_state(session, name, &t));
    free(v);
    printf("state %s\n", name);
  }

  /* One batch of 16: x in [-1, 1], labels 0..9. */
  enum { B = 16 };
  static float x[B * 784];
  int64_t labels[B];
  for (int k = 0; k < B * 784; ++k) x[k] = (float)sin(0.11 * k);
  for (int k = 0; k < B; ++k) labels[k] = k % 10;
  int64_t xs[] = {B, 784}, ls[] = {B};
  tc_tensor_t batch[] = {{.dtype = TC_F32, .rank = 2, .shape = xs, .data = x},
                         {.dtype = TC_I64, .rank = 1, .shape = ls, .data = labels}};
  const char *batch_names[] = {"x", "labels"};
  float loss = 0;
  tc_tensor_t out[] = {{.dtype = TC_F32, .rank = 0, .shape = NULL, .data = &loss}};
  const char *out_names[] = {"loss"};
  for (int step = 1; step <= steps; ++step) {
    CHECK(tc_session_enqueue_step(session, batch_names, batch, 2, out_names, out, 1));
    CHECK(tc_session_synchronize(session));
    printf("step %d loss %.6f\n", step, loss);
  }

  /* Read a parameter back. */
  int64_t b2s[] = {10};
  float b2[10];
  tc_tensor_t b2t = {.dtype = TC_F32, .rank = 1, .shape = b2s, .data = b2};
  CHECK(tc_session_read_state(session, "b2", &b2t));
  printf("b2[0] %.6f\n", b2[0]);

  tc_session_release(session);
  tc_executable_release(exe);
  tc_runtime_release(runtime);
  return 0;
}
