package main

import (
	"time"

	"golang.org/x/sys/unix"
)

// powerOff flushes the disks (a wipe wrote to them) and turns the machine off. It returns
// only if the kernel refused.
func powerOff() error {
	unix.Sync()
	return unix.Reboot(unix.LINUX_REBOOT_CMD_POWER_OFF)
}

// waitForever parks /init for good: PID 1 must never exit (the kernel would panic), and the
// operator's discovery timeout power-cycles a server that never reports.
func waitForever() {
	for {
		time.Sleep(time.Hour)
	}
}
