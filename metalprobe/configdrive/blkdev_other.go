//go:build !linux

package configdrive

import (
	"errors"
	"os"
)

func logicalSectorSize(*os.File) (int, error) {
	return 0, errors.New("block devices are supported on Linux only")
}

func rereadPartitions(*os.File, part) error { return nil }
