package redfish

import (
	"context"
	"fmt"

	"github.com/ironfleet/ironfleet/internal/bmc"
)

// VirtualMedia finds the system's CD/DVD slot. (Stub: being implemented for issue #20.)
func (c *Client) VirtualMedia(ctx context.Context, systemURI string) (bmc.MediaSlot, error) {
	return bmc.MediaSlot{}, fmt.Errorf("virtual media: %w", bmc.ErrUnsupported)
}

// InsertMedia inserts imageURL. (Stub: being implemented for issue #20.)
func (c *Client) InsertMedia(ctx context.Context, systemURI, imageURL string) error {
	return fmt.Errorf("virtual media: %w", bmc.ErrUnsupported)
}

// EjectMedia ejects the inserted media. (Stub: being implemented for issue #20.)
func (c *Client) EjectMedia(ctx context.Context, systemURI string) error {
	return fmt.Errorf("virtual media: %w", bmc.ErrUnsupported)
}
