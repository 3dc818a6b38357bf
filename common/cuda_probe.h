// cuda_probe.h — is there a usable GPU? One answer for the tests, the launchers
// and the drivers, that tells "no GPU here" apart from "a GPU that is broken".
//
// A test that needs a GPU skips (exit 77) where there is none; but a machine
// whose GPU install is broken must FAIL, or the first GPU run shows green while
// nothing ran. So the probe sorts what CUDA says into four states:
//
//   CUDA_READY      devices >= 1
//   CUDA_NOT_BUILT  this binary was built without nvcc                    -> skip
//   CUDA_NO_DEVICE  cudaErrorNoDevice (a driver, and no GPU); or no CUDA
//                   driver at all (cudaErrorInsufficientDriver with driver
//                   version 0) AND no NVIDIA GPU on the PCI bus: a machine
//                   with the toolkit and nothing else, like CI               -> skip
//   CUDA_BROKEN     anything else: a driver older than the runtime, an NVIDIA
//                   GPU on the bus with no driver loaded, a busy or
//                   unavailable device, out of memory at start-up, ...       -> FAIL,
//                   naming the error (cudaGetErrorName) and its text
//
// Why "no driver" may count as "no device": cudaGetDeviceCount cannot tell a
// missing libcuda.so from an old one (both give cudaErrorInsufficientDriver);
// cudaDriverGetVersion can (it reports 0 when no driver is installed). A machine
// with no driver is a GPU-less machine unless the PCI bus shows an NVIDIA
// display or 3D controller: then the GPU is there and its driver is not, which
// is broken. (Where /sys cannot be read the bus counts as showing none, and the
// answer's text says so.)
//
// Test hooks (tests/test_gpu_probe.sh uses them; they replace the probe's answer
// only, so any CUDA call made afterwards still meets the real machine):
//
//   COURSE_FAKE_CUDA_ERROR=insufficient-driver   cudaGetDeviceCount "fails" with
//       that error, the driver counted as present. Also: no-device,
//       devices-unavailable, memory-allocation, initialization-error,
//       system-driver-mismatch, or any cudaError_t number.
//   COURSE_FAKE_CUDA_DEVICES=N[:MODE]            N devices, all in compute mode
//       MODE (default, exclusive-process, prohibited; default when omitted).
//   COURSE_FAKE_PCI_ROOT=DIR                     the PCI bus is read from DIR
//       (DEVICE/vendor, DEVICE/class files) instead of /sys/bus/pci/devices.
#pragma once
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum { CUDA_READY = 0, CUDA_NOT_BUILT, CUDA_NO_DEVICE, CUDA_BROKEN } CudaState;

#define CUDA_PROBE_MAX_DEVICES 64

typedef struct {
    CudaState state;
    int devices;                 // visible devices (0 unless CUDA_READY)
    int error;                   // cudaGetDeviceCount's cudaError_t (0: success)
    char error_name[64];         // cudaGetErrorName, e.g. "cudaErrorNoDevice"
    char error_text[160];        // cudaGetErrorString
    int is_no_device;            // error == cudaErrorNoDevice
    int no_driver;               // cudaErrorInsufficientDriver and driver version 0
    int driver_version;          // cudaDriverGetVersion (0: no driver), e.g. 13000
    int runtime_version;         // cudaRuntimeGetVersion
    int nvidia_pci;              // NVIDIA display/3D controllers on the PCI bus; -1 unreadable
    int compute_mode[CUDA_PROBE_MAX_DEVICES];  // cudaComputeMode of each device (0 = default)
    char fake[96];               // the COURSE_FAKE_CUDA_* setting that shaped it, or ""
    char why[400];               // one line for a SKIP/FAIL message or a refusal
} CudaProbe;

// Probes in this process: CUDA is initialized here afterwards (so do not fork
// ranks after it; see cuda_probe_forked).
void cuda_probe(CudaProbe *p);
// The same in a short-lived child process, so that this one stays CUDA-free and
// may still fork ranks. A child that dies or hangs (120 s) gives CUDA_BROKEN.
void cuda_probe_forked(CudaProbe *p);

// "default", "exclusive-process", "prohibited", "exclusive-thread", or "mode N".
const char *cuda_compute_mode_name(int mode);

// Can `ranks` ranks placed round-robin (rank r on device r % devices) share the
// probed devices? 1 if every device that would hold two or more ranks is in the
// default compute mode; else 0, with `why` naming the device and its mode.
int cuda_probe_can_share(const CudaProbe *p, int ranks, char *why, size_t n);

// For test programs: 0 when the GPU is ready (go on); otherwise prints
// "SKIP <test>: <why>" and returns 77 (not built, no device) or prints
// "FAIL <test>.cuda_probe  <why>" and returns 1 (broken). main returns it.
int cuda_probe_gate(const CudaProbe *p, const char *test);

// Implemented by cuda_query.cu, through cuda_plugin.c (which answers "not built"
// without nvcc, "broken" where the backend's library will not load): asks CUDA
// (or the fake) for the raw answer; cuda_probe() classifies it.
void cuda_probe_query(CudaProbe *p);

#ifdef __cplusplus
}
#endif
