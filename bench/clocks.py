"""The GPU's SM clock while the benchmark times, so that each ratio can be read against the
clocks its two sides ran at: the H100 boosts and throttles with power and heat, and a long
cuBLAS run and a bankops run may settle at different clocks. A thread reads the clock through
NVML (the driver's library, loaded with ctypes) every SAMPLE_MS and stamps each sample."""
import ctypes
import statistics
import threading
import time

import torch

SAMPLE_MS = 50
NVML_CLOCK_SM = 1


def nvml_index(cuda_index):
    """NVML numbers GPUs as the driver does; CUDA_VISIBLE_DEVICES may renumber them for CUDA."""
    try:
        return torch.cuda._get_nvml_device_index(cuda_index)
    except Exception:  # noqa: BLE001  (a torch without the helper: the numbers agree unless renumbered)
        return cuda_index


class SmClock:
    def __init__(self, cuda_index):
        self.samples = []  # (time.perf_counter(), MHz)
        self.stop = threading.Event()
        try:
            self.nvml = ctypes.CDLL("libnvidia-ml.so.1")
            self.handle = ctypes.c_void_p()
            if self.nvml.nvmlInit_v2() != 0 or self.nvml.nvmlDeviceGetHandleByIndex_v2(
                    nvml_index(cuda_index), ctypes.byref(self.handle)) != 0:
                raise OSError("NVML refused")
        except (OSError, AttributeError):  # no NVML: the rows carry no clock
            self.nvml = None
            return
        threading.Thread(target=self._poll, daemon=True).start()

    def _poll(self):
        mhz = ctypes.c_uint()
        while not self.stop.wait(SAMPLE_MS / 1e3):
            if self.nvml.nvmlDeviceGetClockInfo(self.handle, NVML_CLOCK_SM, ctypes.byref(mhz)) == 0:
                self.samples.append((time.perf_counter(), float(mhz.value)))

    def median_between(self, t0, t1):
        """Median MHz of the samples taken from t0 to t1 (perf_counter seconds); None without any."""
        mhz = [m for t, m in list(self.samples) if t0 <= t <= t1]
        return statistics.median(mhz) if mhz else None

    def summary(self):
        """{min, median, max} MHz over every sample of the run, or None."""
        mhz = [m for _, m in list(self.samples)]
        return {"min": min(mhz), "median": statistics.median(mhz), "max": max(mhz)} if mhz else None

    def close(self):
        self.stop.set()
