package wipe

import (
	"context"
	"errors"
	"fmt"
	"os"

	metalv1alpha1 "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
)

// erase applies the erase policy to a disk whose device opened: the device's own erase, read
// back (Method secure); else, when it has none, when it failed or when it read back data, zeros
// over the whole device, read back (Method zero). The message says which ran, why, and what was
// read back.
func (w *wiper) erase(ctx context.Context, dev string, disk metalv1alpha1.StorageDevice, res metalv1alpha1.DiskWipe) metalv1alpha1.DiskWipe {
	rnd := w.rand()
	what, err := w.deviceErase(ctx, dev, disk)
	if err == nil {
		checked, verr := verifyZeros(ctx, dev, rnd)
		if verr == nil {
			res.Method, res.Succeeded, res.Message = MethodSecure, true, what+"; "+checked
			return res
		}
		err = fmt.Errorf("%s, but %w", what, verr)
	}
	var why string
	if errors.Is(err, ErrSecureEraseUnsupported) {
		why = err.Error()
	} else {
		why = "the device's erase failed: " + err.Error()
	}
	res.Method = MethodZero
	msg, err := w.zeroFill(ctx, dev, disk)
	if err != nil {
		res.Message = fmt.Sprintf("%s: %s; %s", disk.Name, why, joinMessage(msg, "zero-fill failed: "+err.Error()))
		return res
	}
	checked, err := verifyZeros(ctx, dev, rnd)
	if err != nil {
		res.Message = fmt.Sprintf("%s: %s; %s; failed verification: %v", disk.Name, why, msg, err)
		return res
	}
	res.Succeeded = true
	res.Message = why + "; " + msg + "; " + checked
	return res
}

// zeroFill writes zeros over the whole device, syncs and closes it.
func (w *wiper) zeroFill(ctx context.Context, dev string, disk metalv1alpha1.StorageDevice) (string, error) {
	f, err := os.OpenFile(dev, os.O_WRONLY, 0)
	if err != nil {
		return "", fmt.Errorf("opening device: %w", err)
	}
	msg, err := w.apply(ctx, f, dev, disk) // every policy but metadata zeroes the whole device
	if err == nil {
		if err = f.Sync(); err != nil {
			err = fmt.Errorf("syncing %s: %w", dev, err)
		}
	}
	if cerr := f.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("closing %s: %w", dev, cerr)
	}
	return msg, err
}
