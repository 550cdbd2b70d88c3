package redfish

import "net/http"

// TransportOf is the HTTP transport a client's requests go through.
func TransportOf(c *Client) *http.Transport {
	return c.api.HTTPClient.Transport.(keepAlive).next.(*http.Transport)
}
