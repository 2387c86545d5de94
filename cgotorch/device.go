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

// Device names where a tensor lives. Index -1 means the current device of that type.
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

// ParseDevice reads "cpu", "cuda" or "cuda:N".
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
		if err != nil || i < 0 {
			return Device{}, fmt.Errorf("%w: bad device index in %q", ErrInvalidArgument, s)
		}
		d.Index = i
	}
	return d, nil
}

func (d Device) c() C.ct_device {
	return C.ct_device{_type: C.int32_t(d.Type), index: C.int32_t(d.Index)}
}

func deviceFromC(d C.ct_device) Device { return Device{Type: DeviceType(d._type), Index: int(d.index)} }

// checkAvailable returns ErrDevice when d cannot be used in this process.
func (d Device) checkAvailable() error {
	switch d.Type {
	case DeviceCPU:
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
