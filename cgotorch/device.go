package cgotorch

// #include "cgotorch.h"
import "C"

import (
	"fmt"
	"strconv"
	"strings"
)

// DeviceType is the kind of a device.
type DeviceType int32

// The device kinds.
const (
	DeviceCPU  DeviceType = C.CT_CPU
	DeviceCUDA DeviceType = C.CT_CUDA
)

// Device names where a tensor lives. Index -1 means the current device of that type; a CPU
// device has index -1 (CPU, what Device reports for every CPU tensor) or 0, no other.
type Device struct {
	Type  DeviceType
	Index int
}

// CPU is the host.
var CPU = Device{Type: DeviceCPU, Index: -1}

// CUDA is GPU number i.
func CUDA(i int) Device { return Device{Type: DeviceCUDA, Index: i} }

func (d Device) String() string {
	name := "cpu"
	if d.Type == DeviceCUDA {
		name = "cuda"
	} else if d.Type != DeviceCPU {
		name = fmt.Sprintf("device(%d)", int32(d.Type))
	}
	if d.Index >= 0 {
		return name + ":" + strconv.Itoa(d.Index)
	}
	return name
}

// ParseDevice reads "cpu", "cuda" or "cuda:N" (and "cpu:0", PyTorch's other name for the CPU;
// a CPU has no other index).
func ParseDevice(s string) (Device, error) {
	name, idx, hasIdx := strings.Cut(strings.ToLower(strings.TrimSpace(s)), ":")
	d := Device{Index: -1}
	switch name {
	case "cpu":
		d.Type = DeviceCPU
	case "cuda":
		d.Type = DeviceCUDA
	default:
		return Device{}, fmt.Errorf("%w: unknown device %q", ErrInvalidArgument, s)
	}
	if hasIdx {
		i, err := strconv.Atoi(idx)
		if err != nil || i < 0 || i > maxDeviceIndex || (d.Type == DeviceCPU && i != 0) {
			return Device{}, fmt.Errorf("%w: bad device index in %q", ErrInvalidArgument, s)
		}
		d.Index = i
	}
	return d, nil
}

func (d Device) c() C.ct_device {
	idx := d.Index
	if int(int32(idx)) != idx {
		idx = -1 << 31 // out of int32: an index the C layer refuses, never a truncated one
	}
	return C.ct_device{_type: C.int32_t(d.Type), index: C.int32_t(idx)}
}

func deviceFromC(d C.ct_device) Device { return Device{Type: DeviceType(d._type), Index: int(d.index)} }

// maxDeviceIndex is the largest device index the C layer accepts (libtorch's DeviceIndex is an
// int8).
const maxDeviceIndex = 127

// checkAvailable returns ErrDevice when d cannot be used in this process: an unknown type, an
// index below -1, a CPU index other than -1 or 0 (libtorch asserts on those), a GPU that is not
// there.
func (d Device) checkAvailable() error {
	if d.Index < -1 || d.Index > maxDeviceIndex {
		return fmt.Errorf("%w: %v (bad device index %d)", ErrDevice, d, d.Index)
	}
	switch d.Type {
	case DeviceCPU:
		if d.Index > 0 {
			return fmt.Errorf("%w: %v (a CPU device index must be -1 or 0)", ErrDevice, d)
		}
		return nil
	case DeviceCUDA:
		n := CUDADeviceCount()
		if n == 0 {
			return fmt.Errorf("%w: %v (libtorch has no CUDA or no GPU is present)", ErrDevice, d)
		}
		if d.Index >= n {
			return fmt.Errorf("%w: %v (%d GPUs)", ErrDevice, d, n)
		}
		return nil
	}
	return fmt.Errorf("%w: %v", ErrDevice, d)
}
