/* The Kiln runtime's C API: load a compiled artifact, ask what it takes and gives, run it.
 *
 * It depends only on libc, libdl and the DLPack header, so it builds for phones, boards and
 * browsers. Every function that can fail returns 0 on success and nonzero on failure, after
 * which kiln_last_error() says why. A loaded model is immutable: one KilnModel may be run
 * from many threads at once (as far as the artifact's own code allows).
 */
#ifndef KILN_RUNTIME_H_
#define KILN_RUNTIME_H_

#include <stdint.h>

#include "dlpack/dlpack.h"

#ifdef __cplusplus
extern "C" {
#endif

/* DLPack 0.6 (Debian 12) predates kDLBool; its value in later DLPack versions. A bool tensor
 * is {KILN_DL_BOOL, 8, 1}, one byte per element. */
#define KILN_DL_BOOL 6

typedef struct KilnModel KilnModel;

/* The message of the latest failure on this thread; valid until the next failing call. */
const char* kiln_last_error(void);

/* Loads the artifact at artifact_path (a shared object, see kiln/artifact_abi.h), checks its
 * ABI version and parses its signature. On failure *out is NULL. */
int kiln_model_load(const char* artifact_path, KilnModel** out);
void kiln_model_free(KilnModel* model);

/* How many threads kiln_model_run may use: 1 (the default, unless the artifact's target asked
 * for more with `threads=N`) runs on the calling thread only, 0 means one per online CPU. Set it before running the model, not while a run is in flight.
 * Fails (nonzero) for a negative count. */
int kiln_model_set_num_threads(KilnModel* model, int32_t num_threads);
int32_t kiln_model_num_threads(const KilnModel* model);

/* The signature. Tensor queries take is_output (0: inputs, 1: outputs) and an index; out of
 * range they answer NULL, -1 or a zero DLDataType. A dim is its text in the signature:
 * "784", "batch" or "seq+past". */
int32_t kiln_model_num_inputs(const KilnModel* model);
int32_t kiln_model_num_outputs(const KilnModel* model);
const char* kiln_model_tensor_name(const KilnModel* model, int32_t is_output, int32_t index);
DLDataType kiln_model_tensor_dtype(const KilnModel* model, int32_t is_output, int32_t index);
int32_t kiln_model_tensor_ndim(const KilnModel* model, int32_t is_output, int32_t index);
const char* kiln_model_tensor_dim(const KilnModel* model, int32_t is_output, int32_t index,
                                  int32_t dim);

/* Computes every output's shape from the inputs' shapes. Their data may be NULL, except for
 * an input whose values decide output shapes (a reshape target given as an input, say): its
 * data must be given, and NULL is an error that names it.
 * output_shapes[i] points to kiln_model_tensor_ndim(model, 1, i) values to fill. */
int kiln_model_output_shapes(const KilnModel* model, const DLTensor* inputs, int32_t num_inputs,
                             int64_t* const* output_shapes, int32_t num_outputs);

/* Runs the model. Outputs carry shapes from kiln_model_output_shapes and caller-owned data.
 * Tensors are dense and row-major (strides NULL or the row-major ones). */
int kiln_model_run(const KilnModel* model, const DLTensor* inputs, int32_t num_inputs,
                   DLTensor* outputs, int32_t num_outputs);

/* Signature dtype names ("f32", "i64", "bool"); NULL for a dtype signatures cannot name. */
const char* kiln_dtype_name(DLDataType dtype);
/* Parses a signature dtype name; nonzero (and no error message) when unknown. */
int kiln_dtype_parse(const char* name, DLDataType* out);

#ifdef __cplusplus
}
#endif

#endif /* KILN_RUNTIME_H_ */
