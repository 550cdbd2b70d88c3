package redfish

import (
	"fmt"
	"io"
	"net/http"
)

// DefaultMaxResponseBytes bounds the body of every Redfish response (--bmc-max-response-bytes).
// gofish reads bodies whole, so without a bound a BMC that answers a gigabyte takes the
// manager's memory with it. The largest resource of the DMTF mockups is 32 KiB (a message
// registry, which Ironfleet does not read), a system about 5 KiB, and a collection of the
// DefaultMaxSystems members under 4 KiB: 4 MiB leaves room for the largest real BMC resources
// while a few concurrent polls at the bound cost the manager tens of MiB, not gigabytes. The
// largest Ironfleet reads is a BIOS attribute registry (BIOSSettings), which can run to
// megabytes: one over the bound fails BIOSSettings, saying so.
const DefaultMaxResponseBytes = 4 << 20

// DefaultMaxSystems is how many systems a BMC may list (--max-systems-per-bmc). Chassis of
// many nodes (blade enclosures, multi-node servers, systems with DPUs) list a few dozen; a BMC
// that lists thousands is broken or hostile, and would flood the cluster with Servers and the
// BMC with requests (each member is read).
const DefaultMaxSystems = 64

// ResponseTooLargeError is a Redfish response whose body was larger than the client reads.
type ResponseTooLargeError struct {
	Path  string // the request's URL path: never its host's credentials or query
	Limit int64
	// Announced is the Content-Length the BMC sent, or -1 when it sent none and the body was
	// found to be longer by reading it.
	Announced int64
}

func (e *ResponseTooLargeError) Error() string {
	if e.Announced >= 0 {
		return fmt.Sprintf("the BMC's answer to %s is %s, over the %s limit on a response; not read", e.Path, byteSize(e.Announced), byteSize(e.Limit))
	}
	return fmt.Sprintf("the BMC's answer to %s is over the %s limit on a response; read no further", e.Path, byteSize(e.Limit))
}

// byteSize is n in the largest binary unit that says it exactly.
func byteSize(n int64) string {
	switch {
	case n >= 1<<30 && n%(1<<30) == 0:
		return fmt.Sprintf("%d GiB", n>>30)
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}

// limitBodies bounds every response body to limit bytes: the one seam every gofish read goes
// through. A response that announces more is refused without reading it (its connection is
// closed, not drained); one that sends more than it announced, or announces nothing, fails
// its read at the limit.
type limitBodies struct {
	next  http.RoundTripper
	limit int64
}

func (l limitBodies) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := l.next.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	if resp.ContentLength > l.limit {
		_ = resp.Body.Close()
		return nil, &ResponseTooLargeError{Path: req.URL.Path, Limit: l.limit, Announced: resp.ContentLength}
	}
	resp.Body = &limitedBody{body: resp.Body, left: l.limit, path: req.URL.Path, limit: l.limit}
	return resp, nil
}

// limitedBody reads a body up to its limit and fails past it, as http.MaxBytesReader does
// for requests.
type limitedBody struct {
	body        io.ReadCloser
	left, limit int64
	path        string
	err         error
}

func (b *limitedBody) Read(p []byte) (int, error) {
	if b.err != nil {
		return 0, b.err
	}
	if int64(len(p)) > b.left+1 {
		p = p[:b.left+1] // one byte past the limit tells a body at it from one over it
	}
	n, err := b.body.Read(p)
	if int64(n) <= b.left {
		b.left -= int64(n)
		return n, err
	}
	n, b.left = int(b.left), 0
	b.err = &ResponseTooLargeError{Path: b.path, Limit: b.limit, Announced: -1}
	return n, b.err
}

func (b *limitedBody) Close() error { return b.body.Close() }
