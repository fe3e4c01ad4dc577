// Every bankops schema, in one place. Kernels are registered per operator and backend in
// ops/<op>.cpp (CPU reference) and ops/<op>_cuda.cpp (CUDA).
#include <Python.h>
#include <torch/library.h>

extern "C" {
// Importing bankops._C loads this library, which runs the registrations below.
PyObject* PyInit__C(void) {
  static struct PyModuleDef module_def = {PyModuleDef_HEAD_INIT, "_C", nullptr, -1, nullptr};
  return PyModule_Create(&module_def);
}
}

TORCH_LIBRARY(bankops, m) {
  m.def("reduce_sum(Tensor x, int? dim=None, bool keepdim=False, str layout=\"swizzle\") -> Tensor");
  m.def("transpose(Tensor x, int dim0=-2, int dim1=-1, str layout=\"swizzle\") -> Tensor");
  m.def("gemm(Tensor a, Tensor b, str layout=\"swizzle\") -> Tensor");
  // torch.nn.functional.linear: x (..., in) @ weight.t() (+ bias, in the gemm's epilogue).
  m.def("linear(Tensor x, Tensor weight, Tensor? bias=None, str layout=\"swizzle\") -> Tensor");
  // Test hooks: the shared-memory tiles the kernels declare, the bank model, poisoned outputs.
  m.def("_tile_map(str tile, str layout) -> Tensor");
  m.def("_tile_info(str tile, str layout) -> Tensor");
  m.def("_bank_cost(Tensor addr, int width, int active=-1, bool store=False, Tensor? src=None, bool zfill=False) -> Tensor");
  m.def("_bank_map(Tensor addr, int width, int active=-1, bool store=False) -> (Tensor, Tensor, Tensor)");
  // (int, not bool: a bool argument takes any number, so _set_poison(2) would pass unnoticed.)
  m.def("_set_poison(int on) -> ()");
  // gemm's options for the calls this thread makes (bankops.options): "name=value,..." over the
  // current ones; returns them as they were. "" changes nothing.
  m.def("_gemm_options(str options=\"\") -> str");
  // A GPU's measured table of plans (bankops.tune): 9 integers an entry; none drops the table.
  m.def("_gemm_tuning(str gpu, int num_sms, int cc, str driver, int[] entries, str source) -> ()");
  // The gemm calls made while recording (bankops.tune.record): on=1 starts afresh, on=0 stops and
  // returns them, 9 integers a call (_gemm_tuning's 8 fields of it, then how often it ran).
  m.def("_gemm_record(int on) -> int[]");
  // The bank probe: one warp, one shared-memory access (or cp.async) at the given lane addresses.
  m.def("_smem_probe(Tensor addr, int width, bool store=False, Tensor? src=None, bool zfill=False) -> Tensor");
  // bankops.explain: each kernel's shared-memory instructions and the bank model's cost.
  m.def("_smem_trace(str op, str layout, ScalarType dtype, int[] problem, int num_sms=132, int cc=90, int[]? room=None, str gpu=\"\") -> (str[], Tensor, Tensor)");
  // gemm's route on a device of num_sms SMs and compute capability cc (10 * major + minor):
  // one line, starting with the kernel family (ffma, mma, wgmma, rows). Meta tensors will do.
  // gpu: the device's name (its cost constants and measured table), or "" for none.
  m.def("_gemm_route(Tensor a, Tensor b, str layout, int num_sms, int cc, int[]? room=None, str gpu=\"\") -> str");
  // The plans the route was chosen from: route lines, tiers, predicted microseconds (NaN: no
  // model), plan keys; the index of the chosen one and who chose it.
  m.def("_gemm_candidates(Tensor a, Tensor b, str layout, int num_sms, int cc, int[]? room=None, str gpu=\"\") -> "
        "(str[], str[], float[], int[], int, str)");
  // The blocks GPU `device` holds at once in thread-block clusters (DeviceInfo::room), for
  // the room argument above.
  m.def("_device_room(int device) -> int[]");
}
