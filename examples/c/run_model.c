/* Runs a compiled tensorc model from C through the runtime's C API.
 *
 *   tensorc compile examples/mlp.json --target cpu -o mlp.tcx
 *   run_model mlp.tcx [BATCH]
 *
 * Every input gets deterministic values (floats: sin(i)/2; integers: i mod 10;
 * bools: i odd), every symbolic dim the size BATCH (default 4); each output's
 * shape and first values are printed. Errors are printed with their status
 * code and the program exits with 1. */
#include "tensorc/tensorc.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static size_t element_size(tc_element_type_t t) {
  switch (t) {
  case TC_F64: case TC_I64: return 8;
  case TC_F32: case TC_I32: return 4;
  case TC_F16: case TC_BF16: return 2;
  default: return 1;
  }
}

static int64_t numel(const int64_t *shape, int32_t rank) {
  int64_t n = 1;
  for (int32_t i = 0; i < rank; ++i) n *= shape[i];
  return n;
}

static void fill(void *data, tc_element_type_t t, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    double v = sin((double)i) / 2;
    switch (t) {
    case TC_F64: ((double *)data)[i] = v; break;
    case TC_F32: ((float *)data)[i] = (float)v; break;
    case TC_I64: ((int64_t *)data)[i] = i % 10; break;
    case TC_I32: ((int32_t *)data)[i] = (int32_t)(i % 10); break;
    case TC_I1: ((uint8_t *)data)[i] = (uint8_t)(i & 1); break;
    default: ((uint16_t *)data)[i] = 0; break; /* f16/bf16 zero */
    }
  }
}

static double value_at(const void *data, tc_element_type_t t, int64_t i) {
  switch (t) {
  case TC_F64: return ((const double *)data)[i];
  case TC_F32: return ((const float *)data)[i];
  case TC_I64: return (double)((const int64_t *)data)[i];
  case TC_I32: return ((const int32_t *)data)[i];
  case TC_I1: return ((const uint8_t *)data)[i];
  default: return NAN;
  }
}

static int fail(tc_status_t status) {
  fprintf(stderr, "run_model: error %d: %s\n", (int)tc_status_code(status), tc_status_message(status));
  tc_status_free(status);
  return 1;
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: run_model MODEL.tcx [BATCH]\n");
    return 2;
  }
  int64_t batch = argc > 2 ? atoll(argv[2]) : 4;
  tc_runtime_options_t options;
  tc_runtime_options_initialize(&options);
  tc_runtime_t *runtime = NULL;
  tc_status_t status = tc_runtime_create(&options, &runtime);
  if (status) return fail(status);
  tc_executable_t *exe = NULL;
  status = tc_executable_load(runtime, argv[1], &exe);
  tc_runtime_release(runtime); /* the executable keeps it alive */
  if (status) return fail(status);

  int32_t n_in = tc_executable_input_count(exe), n_out = tc_executable_output_count(exe);
  tc_tensor_t *inputs = calloc((size_t)n_in, sizeof(tc_tensor_t));
  tc_tensor_t *outputs = calloc((size_t)n_out, sizeof(tc_tensor_t));
  tc_session_t *session = NULL;
  if ((status = tc_session_create(exe, &session))) return fail(status);

  /* Inputs: the declared static sizes; every symbolic dim (-1) = batch. */
  for (int32_t i = 0; i < n_in; ++i) {
    const char *name;
    tc_element_type_t dtype;
    int32_t rank;
    if ((status = tc_executable_input_info(exe, i, &name, &dtype, &rank))) return fail(status);
    int64_t *shape = calloc((size_t)rank + 1, sizeof(int64_t));
    if ((status = tc_executable_input_dims(exe, i, shape))) return fail(status);
    for (int32_t d = 0; d < rank; ++d)
      if (shape[d] < 0) shape[d] = batch;
    inputs[i].dtype = dtype;
    inputs[i].rank = rank;
    inputs[i].shape = shape;
    inputs[i].data = malloc((size_t)numel(shape, rank) * element_size(dtype) + 1);
    fill(inputs[i].data, dtype, numel(shape, rank));
    printf("input %s: rank %d\n", name, rank);
  }
  for (int32_t o = 0; o < n_out; ++o) {
    const char *name;
    tc_element_type_t dtype;
    int32_t rank;
    if ((status = tc_executable_output_info(exe, o, &name, &dtype, &rank))) return fail(status);
    int64_t *shape = calloc((size_t)rank + 1, sizeof(int64_t));
    if ((status = tc_session_output_shape(session, inputs, n_in, o, shape))) return fail(status);
    outputs[o].dtype = dtype;
    outputs[o].rank = rank;
    outputs[o].shape = shape;
    outputs[o].data = malloc((size_t)numel(shape, rank) * element_size(dtype) + 1);
  }
  if ((status = tc_session_run(session, outputs, n_out, inputs, n_in))) return fail(status);
  for (int32_t o = 0; o < n_out; ++o) {
    const char *name;
    tc_executable_output_info(exe, o, &name, NULL, NULL);
    printf("output %s: (", name);
    for (int32_t d = 0; d < outputs[o].rank; ++d)
      printf("%s%lld", d ? ", " : "", (long long)outputs[o].shape[d]);
    printf(") [");
    int64_t n = numel(outputs[o].shape, outputs[o].rank);
    for (int64_t k = 0; k < n && k < 4; ++k)
      printf("%s%.6g", k ? ", " : "", value_at(outputs[o].data, outputs[o].dtype, k));
    printf("%s]\n", n > 4 ? ", ..." : "");
  }
  double device_ms = tc_session_last_device_ms(session);
  if (device_ms < 0)
    printf("device time: none (a cpu artifact)\n");
  else
    printf("device time: %.4f ms\n", device_ms);
  for (int32_t i = 0; i < n_in; ++i) { free((void *)inputs[i].shape); free(inputs[i].data); }
  for (int32_t o = 0; o < n_out; ++o) { free((void *)outputs[o].shape); free(outputs[o].data); }
  free(inputs);
  free(outputs);
  tc_session_release(session);
  tc_executable_release(exe);
  return 0;
}
