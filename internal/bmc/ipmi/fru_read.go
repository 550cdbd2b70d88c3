package ipmi

import (
	"context"
	"fmt"

	"github.com/bougou/go-ipmi/pkg/client"
	"github.com/bougou/go-ipmi/pkg/command/storage"
	"github.com/bougou/go-ipmi/pkg/types"
)

// fruReadChunk is how many bytes a Read FRU Data asks for first, as go-ipmi does; a BMC that
// says it is too many is asked for one fewer, down to one.
const fruReadChunk = 32

// readFRUData reads FRU device 0's whole area, bounded: at most the 64 KiB its 16-bit size
// allows, and only the bytes each answer says it returned. go-ipmi's GetFRUData appends every
// byte of every answer and subtracts the count the BMC claims from what is left, so a BMC that
// claims to return nothing (or more than asked) keeps it reading, and growing its buffer by
// whole datagrams, until the call's deadline.
func readFRUData(ctx context.Context, ic *client.Client) ([]byte, error) {
	info, err := ic.GetFRUInventoryAreaInfo(ctx, 0)
	if err != nil {
		return nil, fmt.Errorf("GetFRUInventoryAreaInfo failed, err: %w", err)
	}
	size := int(info.AreaSizeBytes)
	if size < 1 {
		return nil, fmt.Errorf("invalid FRU size %d", size) // noFRU knows this text
	}
	data := make([]byte, 0, size)
	chunk := fruReadChunk
	for len(data) < size {
		want := min(chunk, size-len(data))
		res, err := ic.ReadFRUData(ctx, 0, uint16(len(data)), uint8(want))
		if err != nil {
			if re, ok := types.IsResponseError(err); ok && storage.ReadFRUDataLength2Big(re.CompletionCode()) && chunk > 1 {
				chunk--
				continue
			}
			return nil, fmt.Errorf("ReadFRUData at offset %d failed, err: %w", len(data), err)
		}
		n := int(res.CountReturned)
		if n < 1 || n > want || n > len(res.Data) {
			return nil, fmt.Errorf("ReadFRUData at offset %d: the BMC says it returned %d bytes of the %d asked, and sent %d", len(data), n, want, len(res.Data))
		}
		data = append(data, res.Data[:n]...)
	}
	return data, nil
}
