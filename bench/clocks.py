"""The GPU's SM clock and board power while the benchmark times, so that each ratio can be read
against the clocks its two sides ran at and the power they drew: the H100 boosts and throttles
with power and heat (at its 700 W limit the clock falls), and a long cuBLAS run and a bankops run
may settle at different clocks. A thread reads both through NVML (the driver's library, loaded
with ctypes) every SAMPLE_MS and stamps each sample."""
import ctypes
import statistics
import threading
import time

import torch

SAMPLE_MS = 50
NVML_CLOCK_SM = 1
# The board's power now (nvmlDeviceGetFieldValues): nvmlDeviceGetPowerUsage averages over a
# second on recent GPUs, longer than a row's two timings.
NVML_FI_DEV_POWER_INSTANT = 186
MHZ, WATTS = 1, 2  # a sample's fields after its time stamp


class FieldValue(ctypes.Structure):  # nvmlFieldValue_t
    _fields_ = [("fieldId", ctypes.c_uint), ("scopeId", ctypes.c_uint), ("timestamp", ctypes.c_longlong),
                ("latencyUsec", ctypes.c_longlong), ("valueType", ctypes.c_int), ("nvmlReturn", ctypes.c_int),
                ("value", ctypes.c_ulonglong)]


def nvml_index(cuda_index):
    """NVML numbers GPUs as the driver does; CUDA_VISIBLE_DEVICES may renumber them for CUDA."""
    try:
        return torch.cuda._get_nvml_device_index(cuda_index)
    except Exception:  # noqa: BLE001  (a torch without the helper: the numbers agree unless renumbered)
        return cuda_index


class SmClock:
    def __init__(self, cuda_index):
        self.samples = []  # (time.perf_counter(), MHz, watts or None)
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

    def driver(self):
        """The driver's version (e.g. "580.159.04"), or None without NVML."""
        if not self.nvml:
            return None
        version = ctypes.create_string_buffer(96)
        return version.value.decode() if self.nvml.nvmlSystemGetDriverVersion(version, 96) == 0 else None

    def _watts(self):
        """The board's power: the instant reading, or the driver's average where that is refused."""
        field = FieldValue(fieldId=NVML_FI_DEV_POWER_INSTANT)
        try:
            if self.nvml.nvmlDeviceGetFieldValues(self.handle, 1, ctypes.byref(field)) == 0 and field.nvmlReturn == 0:
                return (field.value & 0xFFFFFFFF) / 1e3  # an unsigned int of milliwatts
        except Exception:  # noqa: BLE001  (a driver without field values: the average below)
            pass
        mw = ctypes.c_uint()
        return mw.value / 1e3 if self.nvml.nvmlDeviceGetPowerUsage(self.handle, ctypes.byref(mw)) == 0 else None

    def _poll(self):
        mhz = ctypes.c_uint()
        while not self.stop.wait(SAMPLE_MS / 1e3):
            if self.nvml.nvmlDeviceGetClockInfo(self.handle, NVML_CLOCK_SM, ctypes.byref(mhz)) == 0:
                self.samples.append((time.perf_counter(), float(mhz.value), self._watts()))

    def median_between(self, t0, t1, field=MHZ):
        """Median MHz (or WATTS) of the samples taken from t0 to t1 (perf_counter seconds); None
        without any."""
        values = [s[field] for s in list(self.samples) if t0 <= s[0] <= t1 and s[field] is not None]
        return statistics.median(values) if values else None

    def summary(self, field=MHZ):
        """{min, median, max} MHz (or WATTS) over every sample of the run, or None."""
        values = [s[field] for s in list(self.samples) if s[field] is not None]
        return {"min": min(values), "median": statistics.median(values), "max": max(values)} if values else None

    def close(self):
        self.stop.set()
