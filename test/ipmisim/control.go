package ipmisim

import (
	"bufio"
	"fmt"
	"net"
	"strings"
	"time"
)

// controlTimeout bounds one control program connection; the program is bash talking to
// this process over loopback.
const controlTimeout = 5 * time.Second

// serveControl answers the control program until the listener closes.
func (b *BMC) serveControl() {
	defer b.served.Done()
	for {
		c, err := b.control.Accept()
		if err != nil {
			return
		}
		b.served.Add(1)
		go func() {
			defer b.served.Done()
			defer c.Close()
			_ = c.SetDeadline(time.Now().Add(controlTimeout))
			line, err := bufio.NewReader(c).ReadString('\n')
			if err != nil {
				return
			}
			_, _ = c.Write([]byte(b.handle(strings.Fields(line))))
		}()
	}
}

// handle answers one call of the control program: "chassis <get|set> ..." or
// "lan get ...". Answers are "param:value" lines.
func (b *BMC) handle(args []string) string {
	if len(args) < 2 {
		return ""
	}
	kind, verb, params := args[0], args[1], args[2:]
	if verb == "get" {
		var out strings.Builder
		for _, p := range params {
			if v, ok := b.get(kind, p); ok {
				fmt.Fprintf(&out, "%s:%s\n", p, v)
			}
		}
		return out.String()
	}
	if kind == "chassis" && verb == "set" && len(params) >= 2 {
		b.set(params[0], params[1])
	}
	return ""
}

func (b *BMC) get(kind, param string) (string, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if kind == "lan" {
		switch {
		case param == "mac_addr":
			return or(b.opts.MAC, "00:00:00:00:00:00"), true
		case param == "ip_addr_src":
			return "static", true
		case param == "ip_addr":
			host, _, _ := net.SplitHostPort(b.udpAddr)
			return host, true
		case param == "subnet_mask":
			return "255.0.0.0", true
		case strings.HasSuffix(param, "_ip_addr"):
			return "0.0.0.0", true
		case strings.HasSuffix(param, "_mac_addr"):
			return "00:00:00:00:00:00", true
		}
		return "", false
	}
	switch param {
	case "power":
		if b.power == "On" {
			return "1", true
		}
		return "0", true
	case "boot":
		return b.boot, true
	}
	return "", false
}

// set carries out "set <param> <value>" and calls the hooks with what it did, in order.
func (b *BMC) set(param, value string) {
	b.cmdMu.Lock()
	defer b.cmdMu.Unlock()
	b.mu.Lock()
	b.log = append(b.log, "set "+param+" "+value)
	from := b.power
	var a *PowerAction
	switch {
	case param == "boot":
		b.boot = value
	case param == "power" && value == "1" && from == "Off":
		a = &PowerAction{Action: ActionOn, To: "On", Boot: b.consumeBoot()}
	case param == "power" && value == "0" && from == "On":
		a = &PowerAction{Action: ActionOff, To: "Off"}
	case param == "reset" && value == "1" && from == "On":
		a = &PowerAction{Action: ActionReset, To: "On", Boot: b.consumeBoot()}
	case param == "shutdown" && value == "1" && from == "On":
		a = &PowerAction{Action: ActionShutdown, To: "On"} // On until the host goes off
	}
	// Anything else asks nothing of the host: power on while on, off while off, a reset or
	// shutdown of a host that is off.
	if a == nil {
		b.mu.Unlock()
		return
	}
	a.From, a.Time = from, time.Now()
	b.power = a.To
	hooks := append([]func(PowerAction){}, b.hooks...)
	b.mu.Unlock()
	for _, h := range hooks {
		h(*a)
	}
}

// consumeBoot returns the device a (re)boot uses and forgets it; the caller holds b.mu.
func (b *BMC) consumeBoot() string {
	d := b.boot
	b.boot = "none"
	if d == "none" || d == "" {
		return "default"
	}
	return d
}
