package bmcsim

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
)

// FirmwareImageMagic is the first line of a firmware image the simulator installs.
const FirmwareImageMagic = "IRONFLEET-FIRMWARE 1"

// FirmwareImage is a firmware image the simulator installs: the line FirmwareImageMagic, then
// component=<component> (BIOS, BMC, NIC, or a FirmwareInventory member's Id) and
// version=<version>. Serve it over HTTP(S) for SimpleUpdate, or push it to the
// MultipartHttpPushUri.
func FirmwareImage(component, version string) []byte {
	return fmt.Appendf(nil, "%s\ncomponent=%s\nversion=%s\n", FirmwareImageMagic, component, version)
}

// firmwareImage is what an image says.
type firmwareImage struct{ component, version string }

// parseFirmwareImage reads an image's header: the magic line, then key=value lines up to a
// blank line or the end (what follows a blank line is a payload, ignored). Lines starting with
// # are comments, unknown keys are ignored; component and version must be there.
func parseFirmwareImage(r io.Reader) (firmwareImage, error) {
	sc := bufio.NewScanner(io.LimitReader(r, maxImageHeader))
	sc.Buffer(make([]byte, 0, 4096), maxImageHeader)
	if !sc.Scan() || strings.TrimSpace(sc.Text()) != FirmwareImageMagic {
		return firmwareImage{}, fmt.Errorf("its first line is not %q", FirmwareImageMagic)
	}
	var img firmwareImage
	ended := false
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" {
			ended = true
			break
		}
		if strings.HasPrefix(line, "#") {
			continue
		}
		key, value, ok := strings.Cut(line, "=")
		if !ok {
			return firmwareImage{}, fmt.Errorf("its header line %q is not key=value", truncateText(line, 40))
		}
		switch strings.ToLower(strings.TrimSpace(key)) {
		case "component":
			img.component = strings.TrimSpace(value)
		case "version":
			img.version = strings.TrimSpace(value)
		}
	}
	if !ended && sc.Err() != nil {
		return firmwareImage{}, fmt.Errorf("its header is longer than %d bytes", maxImageHeader)
	}
	switch {
	case img.component == "":
		return firmwareImage{}, errors.New("it names no component")
	case img.version == "":
		return firmwareImage{}, errors.New("it names no version")
	case len(img.version) > maxVersionLength || strings.ContainsFunc(img.version, func(r rune) bool { return r < ' ' || r == 0x7f }):
		return firmwareImage{}, fmt.Errorf("its version is not printable text of at most %d characters", maxVersionLength)
	}
	return img, nil
}

// fetchFirmware fetches an image as InsertMedia fetches one (media_fetch.go: no proxy,
// certificates not verified, bounded in time), with Basic auth when a user is given, and
// reads its header. What went wrong is returned as the task's message; it never holds the
// image's path or query, which may carry a token.
func (b *BMC) fetchFirmware(ctx context.Context, u *url.URL, user, pass string) (img firmwareImage, failure, failureID string) {
	shown := u.Scheme + "://" + u.Host + "/…"
	timeout := DefaultMediaFetchTimeout
	if b.media != nil {
		timeout = b.media.timeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return firmwareImage{}, fmt.Sprintf("Transfer of the image from %s failed: the URI is not valid.", shown), msgTransferFailed
	}
	req.Header.Set("User-Agent", "bmcsim-update-service")
	if user != "" {
		req.SetBasicAuth(user, pass)
	}
	resp, err := (&http.Client{Transport: mediaTransport}).Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // without the URL
		}
		return firmwareImage{}, fmt.Sprintf("Transfer of the image from %s failed: %v.", shown, err), msgTransferFailed
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return firmwareImage{}, fmt.Sprintf("Transfer of the image from %s failed: HTTP %s.", shown, resp.Status), msgTransferFailed
	}
	img, err = parseFirmwareImage(resp.Body)
	if err != nil {
		return firmwareImage{}, "The image is not a firmware image this BMC can install: " + err.Error() + ".", msgApplyFailed
	}
	return img, "", ""
}
