package collect

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"sort"

	"github.com/ironfleet/ironfleet/internal/report"
	"github.com/ironfleet/ironfleet/metalprobe/lldp"
)

// lldp attaches what lldpd heard to the NIC of the same name. On the live system it runs
// lldpctl (Options.LLDPCtl, else lldpctl on PATH); under a root it reads <root>/lldpctl.json
// when present and is silent otherwise. A NIC with several neighbours keeps the first, and
// the rest is noted.
func (c *collector) lldp(ctx context.Context, rep *report.Report) error {
	data, err := c.lldpJSON(ctx)
	if err != nil || data == nil {
		return err
	}
	neighbors, err := lldp.Parse(data)
	if err != nil {
		return err
	}
	nics := rep.Inventory.NetworkInterfaces
	byName := make(map[string]int, len(nics))
	for i := range nics {
		byName[nics[i].Name] = i
	}
	names := make([]string, 0, len(neighbors))
	for name := range neighbors {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		heard := neighbors[name]
		i, ok := byName[name]
		if !ok {
			c.note("lldp: neighbour heard on %s, which is not a reported NIC", name)
			continue
		}
		if len(heard) == 0 {
			continue
		}
		n := heard[0]
		nics[i].LLDP = &n
		if len(heard) > 1 {
			c.note("lldp: %s hears %d neighbours; reporting the first (%s)", name, len(heard), n.ChassisID)
		}
	}
	return nil
}

// lldpJSON returns lldpctl's output, or nil (and no error) when there is nothing to read.
func (c *collector) lldpJSON(ctx context.Context) ([]byte, error) {
	if !c.live {
		data, err := os.ReadFile(c.path(LLDPFixture))
		if errors.Is(err, fs.ErrNotExist) {
			return nil, nil
		}
		if err != nil {
			return nil, fmt.Errorf("reading %s: %w", LLDPFixture, unrooted(err, c.root))
		}
		return data, nil
	}
	bin := c.lldpctl
	if bin == "" {
		found, err := exec.LookPath("lldpctl")
		if err != nil {
			return nil, errors.New("lldpctl not found on PATH")
		}
		bin = found
	}
	return lldp.Query(ctx, bin)
}
