// Command pause is a pod sandbox's first process for test/node's containerd: it holds the
// pod's namespaces and does nothing until it is told to stop. It is built into the pause image
// by make images (containerd's CRI needs one, and none can be pulled here).
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGINT, syscall.SIGTERM)
	// As PID 1 of its pod it adopts orphans: reap them so none stays a zombie.
	children := make(chan os.Signal, 1)
	signal.Notify(children, syscall.SIGCHLD)
	for {
		select {
		case <-stop:
			return
		case <-children:
			for {
				var status syscall.WaitStatus
				if pid, err := syscall.Wait4(-1, &status, syscall.WNOHANG, nil); pid <= 0 || err != nil {
					break
				}
			}
		}
	}
}
