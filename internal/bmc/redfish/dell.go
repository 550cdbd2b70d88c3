package redfish

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	metalv1alpha1 "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
	"github.com/ironfleet/ironfleet/internal/bmc"
)

// iDRAC's virtual CD. On iDRAC, BootSourceOverrideTarget Cd boots the server's physical
// optical drive, not the virtual CD the image was inserted into, so a virtual-media boot set the
// standard way boots on past an empty drive. iDRAC boots the virtual CD when its attribute
// ServerBoot.1#FirstBootDevice is VCD-DVD, which a client sets through the Manager's Dell OEM
// action ImportSystemConfiguration (a Server Configuration Profile); ServerBoot.1#BootOnce
// Enabled makes it the next boot only, Disabled every boot. This is what Ironic's idrac-redfish
// virtual media boot does (sushy-oem-idrac, DellManagerExtension.set_virtual_boot_device).

// dellImportSuffix ends the key of the Manager's OEM action ("#OemManager.v1_0_0#OemManager.
// ImportSystemConfiguration" on iDRAC 9 and 10).
const dellImportSuffix = "#OemManager.ImportSystemConfiguration"

// isDell says whether a Manufacturer is Dell's ("Dell Inc.").
func isDell(manufacturer string) bool {
	return strings.HasPrefix(strings.ToLower(strings.TrimSpace(manufacturer)), "dell")
}

// dellImportWait bounds the wait for the import job.
const dellImportWait = 2 * time.Minute

// dellVirtualCD finds the iDRAC import action of a Dell system's manager: its target URI and
// the manager's Id (the FQDD of the profile's component), or "" when neither the system nor its
// manager (the first ManagedBy link) says Dell as Manufacturer, or the manager offers no such
// action, or manages more than one server (the standard override is then all there is). It
// costs one GET, of the manager.
func (c *Client) dellVirtualCD(ctl *systemControls) (target, fqdd string) {
	if len(ctl.Links.ManagedBy) == 0 {
		return "", ""
	}
	var mgr struct {
		ID           string `json:"Id"`
		Manufacturer string
		Actions      struct {
			Oem map[string]json.RawMessage
		}
		Links struct {
			ManagerForServers []link
		}
	}
	if _, err := c.getJSON(ctl.Links.ManagedBy[0].ID, &mgr); err != nil || mgr.ID == "" {
		return "", ""
	}
	if !isDell(ctl.Manufacturer) && !isDell(mgr.Manufacturer) {
		return "", ""
	}
	if len(mgr.Links.ManagerForServers) > 1 {
		return "", "" // the profile names no system: only an iDRAC of one server is meant
	}
	for key, raw := range mgr.Actions.Oem {
		if !strings.HasSuffix(key, dellImportSuffix) {
			continue
		}
		var action struct {
			Target string `json:"target"`
		}
		if json.Unmarshal(raw, &action) == nil && action.Target != "" {
			return action.Target, mgr.ID
		}
	}
	return "", ""
}

// dellBootVirtualCD sets ServerBoot.1#FirstBootDevice VCD-DVD through the import action and
// waits for its job. BootSourceOverrideMode is not sent: the profile sets the device only, and
// iDRAC refuses to PATCH the mode anyway; the boot happens in the firmware's mode.
func (c *Client) dellBootVirtualCD(ctx context.Context, systemURI, target, fqdd, enabled string) error {
	once := "Enabled"
	if enabled == "Continuous" {
		once = "Disabled"
	}
	// iDRAC's job fails on insignificant whitespace in the profile (sushy-oem-idrac's note).
	profile := fmt.Sprintf(`<SystemConfiguration><Component FQDD=%q><Attribute Name="ServerBoot.1#BootOnce">%s</Attribute>`+
		`<Attribute Name="ServerBoot.1#FirstBootDevice">VCD-DVD</Attribute></Component></SystemConfiguration>`, fqdd, once)
	doing := fmt.Sprintf("setting %s to boot from the virtual CD (%s) through iDRAC's ImportSystemConfiguration", systemURI, enabled)
	resp, err := c.api.Post(target, map[string]any{"ShareParameters": map[string]string{"Target": "ALL"}, "ImportBuffer": profile})
	if err != nil {
		return classify(doing, err)
	}
	job := resp.Header.Get("Location")
	drain(resp.Body)
	if job == "" {
		return nil // applied without a job
	}
	deadline := time.Now().Add(dellImportWait)
	for {
		done, failed, err := c.dellJobState(job)
		switch {
		case err != nil:
			return classify(doing+": reading job "+job, err)
		case failed != "":
			return bmc.Errorf(metalv1alpha1.BMCReasonProtocolError, "%s: job %s failed: %s", doing, job, failed)
		case done:
			return nil
		case time.Now().After(deadline):
			return bmc.Errorf(metalv1alpha1.BMCReasonProtocolError, "%s: job %s not done after %s", doing, job, dellImportWait)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(c.media.poll):
		}
	}
}

// dellJobState reads an import job (a Task, 202 while it runs): done when its TaskState is
// Completed and its Dell JobState, if any, too; failed names why it failed.
func (c *Client) dellJobState(uri string) (done bool, failed string, err error) {
	resp, err := c.api.Get(uri)
	if err != nil {
		return false, "", err
	}
	defer drain(resp.Body)
	var task struct {
		TaskState string
		Messages  []struct{ Message string }
		Oem       struct {
			Dell struct{ JobState, Message string }
		}
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&task); err != nil {
		return false, "", fmt.Errorf("decoding %s: %w", uri, err)
	}
	message := task.Oem.Dell.Message
	if message == "" && len(task.Messages) > 0 {
		message = task.Messages[0].Message
	}
	switch {
	case task.TaskState == "Exception" || task.TaskState == "Killed" || task.TaskState == "Cancelled" ||
		task.Oem.Dell.JobState == "Failed" || task.Oem.Dell.JobState == "CompletedWithErrors":
		return false, truncate(clean(fmt.Sprintf("%s %s: %s", task.TaskState, task.Oem.Dell.JobState, message)), 300), nil
	case task.TaskState == "Completed" && (task.Oem.Dell.JobState == "" || task.Oem.Dell.JobState == "Completed"):
		return true, "", nil
	}
	return false, "", nil
}
