/* cuda_dl.c - cuBLAS and NCCL loaded on first use (see cuda_dl.h).  The
 * library is looked up by its soname, then at the path CMake found. */
#include "cuda_dl.h"

#include <dlfcn.h>
#include <stdio.h>

#include "err.h"

static void *open_lib(const char *soname, const char *path, char *why, size_t cap) {
  void *h = dlopen(soname, RTLD_NOW | RTLD_LOCAL);
  if (!h && path[0]) h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!h) snprintf(why, cap, "%s", dlerror());
  return h;
}

/* Fill n function pointers from names; SG_EUNSUPPORTED on the first one
 * missing. */
static int bind(void *lib, const char *libname, void **slots, const char *const *names, int n) {
  for (int i = 0; i < n; i++)
    if (!(slots[i] = dlsym(lib, names[i])))
      return sg_err_set(SG_EUNSUPPORTED, "%s: no symbol %s", libname, names[i]);
  return SG_OK;
}

int sg_cublas(const sg_cublas_api_t **out) {
  static sg_cublas_api_t api;
  static int loaded;
  static const char *const names[] = {"cublasCreate_v2", "cublasDestroy_v2",
                                      "cublasSetStream_v2", "cublasSgemm_v2",
                                      "cublasSetMathMode"};
  char why[512];
  if (!loaded) {
    void *lib = open_lib(SG_CUBLAS_SONAME, SG_CUBLAS_PATH, why, sizeof why);
    if (!lib) return sg_err_set(SG_EUNSUPPORTED, "cannot load cuBLAS (%s): %s", SG_CUBLAS_SONAME, why);
    void *slots[5];
    SG_CHECK(bind(lib, SG_CUBLAS_SONAME, slots, names, 5));
    *(void **)&api.create = slots[0];
    *(void **)&api.destroy = slots[1];
    *(void **)&api.set_stream = slots[2];
    *(void **)&api.sgemm = slots[3];
    *(void **)&api.set_math_mode = slots[4];
    loaded = 1;
  }
  *out = &api;
  return SG_OK;
}

int sg_cublas_handle(const sg_cublas_api_t *cb, cudaStream_t s, int tf32, cublasHandle_t *h) {
  cublasStatus_t st = cb->create(h);
  if (st != CUBLAS_STATUS_SUCCESS) return sg_err_set(SG_EIO, "cublasCreate: cuBLAS status %d", (int)st);
  if ((st = cb->set_stream(*h, s)) == CUBLAS_STATUS_SUCCESS)
    st = cb->set_math_mode(*h, tf32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH);
  if (st != CUBLAS_STATUS_SUCCESS) {
    cb->destroy(*h);
    return sg_err_set(SG_EIO, "cublasSetStream/SetMathMode: cuBLAS status %d", (int)st);
  }
  return SG_OK;
}

#ifdef SG_HAVE_NCCL
int sg_nccl(const sg_nccl_api_t **out) {
  static sg_nccl_api_t api;
  static int loaded;
  static const char *const names[] = {"ncclGetUniqueId",    "ncclCommInitRank",
                                      "ncclAllReduce",      "ncclCommDestroy",
                                      "ncclGetErrorString", "ncclReduceScatter",
                                      "ncclAllGather"};
  char why[512];
  if (!loaded) {
    void *lib = open_lib(SG_NCCL_SONAME, SG_NCCL_PATH, why, sizeof why);
    if (!lib) return sg_err_set(SG_EUNSUPPORTED, "cannot load NCCL (%s): %s", SG_NCCL_SONAME, why);
    void *slots[7];
    SG_CHECK(bind(lib, SG_NCCL_SONAME, slots, names, 7));
    *(void **)&api.get_unique_id = slots[0];
    *(void **)&api.comm_init_rank = slots[1];
    *(void **)&api.all_reduce = slots[2];
    *(void **)&api.comm_destroy = slots[3];
    *(void **)&api.error_string = slots[4];
    *(void **)&api.reduce_scatter = slots[5];
    *(void **)&api.all_gather = slots[6];
    loaded = 1;
  }
  *out = &api;
  return SG_OK;
}
#endif
