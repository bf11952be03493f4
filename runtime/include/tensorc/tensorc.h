/* tensorc runtime, C API (IREE-style naming: tc_<object>_<verb>). Loads a
 * `.tcx` artifact written by `tensorc compile --target cpu|cuda` and runs it
 * on host or device tensors.
 * Usable from C and through FFI (ctypes, cffi, Rust bindgen). See
 * docs/runtime.md and examples/c/run_model.c.
 *
 * Errors: every function that can fail returns a tc_status_t; NULL means
 * success. A non-NULL status carries a code and a one-line message and must
 * be freed with tc_status_free.
 *
 * Objects are reference counted (_retain/_release). Thread safety is stated
 * per function. */
#ifndef TENSORC_TENSORC_H_
#define TENSORC_TENSORC_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------- status */

typedef enum tc_status_code_e {
  TC_STATUS_OK = 0,
  TC_STATUS_INVALID_ARGUMENT = 1,  /* wrong inputs/outputs, null pointers */
  TC_STATUS_NOT_FOUND = 2,         /* the artifact file cannot be opened */
  TC_STATUS_INVALID_ARTIFACT = 3,  /* truncated, corrupted, wrong version or target */
  TC_STATUS_INTERNAL = 4,          /* anything else (out of memory, ...) */
} tc_status_code_t;

typedef struct tc_status_s *tc_status_t;

/* Thread-safe on distinct statuses. */
tc_status_code_t tc_status_code(tc_status_t status);
const char *tc_status_message(tc_status_t status); /* "" for NULL */
void tc_status_free(tc_status_t status);

/* --------------------------------------------------------------- types */

typedef enum tc_element_type_e {
  TC_F64 = 0, TC_F32 = 1, TC_F16 = 2, TC_BF16 = 3, TC_I64 = 4, TC_I32 = 5, TC_I1 = 6,
} tc_element_type_t;

/* Where memory lives; DLPack's numbering. 0 (a zero-initialized struct)
 * means host memory. */
typedef enum tc_device_type_e {
  TC_DEVICE_HOST = 1, /* kDLCPU */
  TC_DEVICE_CUDA = 2, /* kDLCUDA */
} tc_device_type_t;

/* Caller-owned memory at data + byte_offset, row-major and contiguous.
 * Zero-initialize the struct: the fields after `data` then mean host
 * memory, contiguous, no offset. `strides` (in elements, NULL: contiguous)
 * may be given as DLPack gives them; they must describe the contiguous
 * layout. A tensor on the executable's device is used in place; a host
 * tensor of a cuda executable is copied. */
typedef struct tc_tensor_t {
  tc_element_type_t dtype;
  int32_t rank;
  const int64_t *shape; /* rank sizes */
  void *data;
  int32_t device_type;   /* tc_device_type_t; 0 = host */
  int32_t device_id;     /* the device ordinal */
  const int64_t *strides; /* rank strides in elements, or NULL */
  uint64_t byte_offset;
} tc_tensor_t;

/* ------------------------------------------------------------- runtime */

typedef struct tc_runtime_options_t {
  uint32_t threads; /* kernel threads per executable; 0 = one per hardware thread */
  /* cuda artifacts: the compiled-kernel cache directory (copied at create);
   * NULL = the default ($TENSORC_CACHE_DIR, else $XDG_CACHE_HOME/tensorc/
   * kernels, else ~/.cache/tensorc/kernels). */
  const char *kernel_cache_dir;
  /* "default" or "reduce-overhead" (cuda: replay each session's launch
   * sequence as a CUDA graph); NULL: the mode the artifact was compiled
   * with. Copied at create. */
  const char *mode;
} tc_runtime_options_t;

/* Fills defaults. */
void tc_runtime_options_initialize(tc_runtime_options_t *out_options);

typedef struct tc_runtime_s tc_runtime_t;

/* Thread-safe. */
tc_status_t tc_runtime_create(const tc_runtime_options_t *options, tc_runtime_t **out_runtime);
void tc_runtime_retain(tc_runtime_t *runtime);
void tc_runtime_release(tc_runtime_t *runtime);

/* Autotuning of the executables loaded after this call (docs/autotune.md):
 * mode "default" (or NULL: the autotune cache's choices where it has them,
 * else heuristics), "max-autotune" (measure what the cache does not know,
 * checked against the default, and store the winners) or "strict" (a launch
 * the cache does not know is an error); tune_db: the cache's file, NULL:
 * $TENSORC_TUNE_DB, else the XDG cache folder. Both copied. An unknown mode
 * is TC_STATUS_INVALID_ARGUMENT. Not thread-safe with loads on the same
 * runtime. */
tc_status_t tc_runtime_set_autotune(tc_runtime_t *runtime, const char *mode, const char *tune_db);

/* ---------------------------------------------------------- executable */

typedef struct tc_executable_s tc_executable_t;

/* Loads and checks an artifact. Thread-safe. */
tc_status_t tc_executable_load(tc_runtime_t *runtime, const char *path,
                               tc_executable_t **out_executable);
tc_status_t tc_executable_load_from_memory(tc_runtime_t *runtime, const void *data, size_t size,
                                           tc_executable_t **out_executable);
void tc_executable_retain(tc_executable_t *executable);
void tc_executable_release(tc_executable_t *executable);

/* Signature queries. Thread-safe; returned strings live as long as the
 * executable. Dims are written as text: "784", "B", "4*T". */
int32_t tc_executable_input_count(const tc_executable_t *executable);
int32_t tc_executable_output_count(const tc_executable_t *executable);
tc_status_t tc_executable_input_info(const tc_executable_t *executable, int32_t index,
                                     const char **out_name, tc_element_type_t *out_dtype,
                                     int32_t *out_rank);
tc_status_t tc_executable_output_info(const tc_executable_t *executable, int32_t index,
                                      const char **out_name, tc_element_type_t *out_dtype,
                                      int32_t *out_rank);

/* Declared sizes of input `index`: the static sizes, -1 for symbolic dims
 * (bound at run time from the inputs' shapes). out_dims must hold the
 * input's rank. Thread-safe. */
tc_status_t tc_executable_input_dims(const tc_executable_t *executable, int32_t index,
                                     int64_t *out_dims);

/* The device an executable's runs compute on (TC_DEVICE_HOST for cpu
 * artifacts, TC_DEVICE_CUDA and the ordinal for cuda ones). Thread-safe. */
tc_status_t tc_executable_device(const tc_executable_t *executable, int32_t *out_device_type,
                                 int32_t *out_device_id);

/* Memory on the executable's device (host memory for cpu executables),
 * aligned for every element type: for outputs and resident tensors. Free it
 * with tc_executable_free once no queued run uses it. Thread-safe. For a
 * CUDA program with collectives, 1 MiB or more comes from NCCL's symmetric
 * windows and allocating and freeing are collective: every rank allocates
 * the same sizes in the same order (docs/sharding.md "Symmetric memory"). */
tc_status_t tc_executable_allocate(tc_executable_t *executable, size_t bytes, void **out_data);
void tc_executable_free(tc_executable_t *executable, void *data);

/* ------------------------------------------------------------- session */

/* One run's state (bound sizes, memory arena reused across runs). A session
 * is used by one thread at a time; any number of sessions may run one
 * executable concurrently. */
typedef struct tc_session_s tc_session_t;

tc_status_t tc_session_create(tc_executable_t *executable, tc_session_t **out_session);
void tc_session_release(tc_session_t *session);

/* The shape of output `index` for these inputs (binds symbolic sizes from
 * the inputs' shapes); out_shape must hold the output's rank. */
tc_status_t tc_session_output_shape(tc_session_t *session, const tc_tensor_t *inputs,
                                    int32_t input_count, int32_t index, int64_t *out_shape);

/* Runs: outputs first, then inputs (both in declaration order). Outputs are
 * caller-owned and must have the bound shapes. */
tc_status_t tc_session_run(tc_session_t *session, const tc_tensor_t *outputs,
                           int32_t output_count, const tc_tensor_t *inputs, int32_t input_count);

/* Device-resident runs: queues the run on the session's stream and returns
 * (a cpu executable runs before returning). Tensors must stay valid and
 * unchanged until tc_session_synchronize returns. */
tc_status_t tc_session_enqueue(tc_session_t *session, const tc_tensor_t *outputs,
                               int32_t output_count, const tc_tensor_t *inputs,
                               int32_t input_count);
/* Waits for everything queued; reports kernel faults and the run-time
 * checks of the last run enqueued (an index out of range, naming the node). */
tc_status_t tc_session_synchronize(tc_session_t *session);
/* cuda executables: the CUstream / cudaStream_t to queue runs on (NULL:
 * CUDA's default stream, as in CUDA); it must outlive its use.
 * tc_session_use_own_stream goes back to the session's own stream (the
 * default). */
tc_status_t tc_session_set_stream(tc_session_t *session, void *stream);
tc_status_t tc_session_use_own_stream(tc_session_t *session);
/* cuda executables: replay the launch sequence as a CUDA graph:
 * TC_CUDA_GRAPHS_OFF, TC_CUDA_GRAPHS_ALWAYS (any other nonzero value too),
 * or TC_CUDA_GRAPHS_REPEATED: only runs whose tensor addresses and sizes
 * one of the last 8 runs had (a loop on the same tensors replays from its
 * second run; new tensors each run never pay for a capture). The default
 * comes from the executable's mode (reduce-overhead: always, else off). */
#define TC_CUDA_GRAPHS_OFF 0
#define TC_CUDA_GRAPHS_ALWAYS 1
#define TC_CUDA_GRAPHS_REPEATED 2
tc_status_t tc_session_set_cuda_graphs(tc_session_t *session, int32_t mode);

/* Resident state for training steps (docs/runtime.md): inputs X the
 * artifact also returns as X.next live in the session across runs.
 * state_count/state_name list them (the name lives as long as the
 * session); set_state copies a value in, read_state copies the current
 * value out (and waits); enqueue_step runs with the state as inputs, given
 * the other inputs (and any outputs wanted) by name, and swaps in each
 * X.next. */
int32_t tc_session_state_count(const tc_session_t *session);
const char *tc_session_state_name(const tc_session_t *session, int32_t index);
tc_status_t tc_session_set_state(tc_session_t *session, const char *name, const tc_tensor_t *value);
tc_status_t tc_session_read_state(tc_session_t *session, const char *name, const tc_tensor_t *out);
tc_status_t tc_session_enqueue_step(tc_session_t *session, const char *const *input_names,
                                    const tc_tensor_t *inputs, int32_t input_count,
                                    const char *const *output_names, const tc_tensor_t *outputs,
                                    int32_t output_count);

/* ------------------------------------------------------------- weights */

/* A .safetensors file, memory-mapped and checked when opened (header
 * bounds, JSON, dtypes, shapes against byte sizes, offsets, overlaps):
 * a model's parameters by name. Thread-safe; immutable. */
typedef struct tc_weights_s tc_weights_t;

tc_status_t tc_weights_open(const char *path, tc_weights_t **out_weights);
void tc_weights_release(tc_weights_t *weights);
int32_t tc_weights_count(const tc_weights_t *weights);
/* Tensor `index` (file order): its name and a host view into the mapping
 * (read-only; shape and data live as long as the weights). */
tc_status_t tc_weights_tensor(const tc_weights_t *weights, int32_t index, const char **out_name,
                              tc_tensor_t *out_tensor);

/* Bound inputs: a value copied once into session memory that
 * tc_session_enqueue_step uses for the input of that name whenever it is
 * not given (binding a state input sets the state). bind_weights binds
 * every input `weights` has a tensor for (others in the file are skipped)
 * and writes how many to out_bound (may be NULL); a dtype or shape that does
 * not match the input is TC_STATUS_INVALID_ARGUMENT naming both. Binding
 * again replaces the value (new weights, no recompilation). */
tc_status_t tc_session_bind_input(tc_session_t *session, const char *name, const tc_tensor_t *value);
tc_status_t tc_session_bind_weights(tc_session_t *session, const tc_weights_t *weights,
                                    int32_t *out_bound);

/* Bytes of the arena the last run planned (the session's intermediates). */
int64_t tc_session_arena_bytes(const tc_session_t *session);

/* cuda artifacts: milliseconds the GPU spent on the last run's launch
 * sequence (CUDA events; copies excluded); -1 for cpu artifacts or before a
 * run. */
double tc_session_last_device_ms(const tc_session_t *session);

#ifdef __cplusplus
}
#endif

#endif /* TENSORC_TENSORC_H_ */
