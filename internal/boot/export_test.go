package boot

import (
	"context"
	"net"
	"net/netip"
	"path/filepath"

	ctrl "sigs.k8s.io/controller-runtime"

	metalv1alpha1 "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
	"github.com/ironfleet/ironfleet/internal/boot/dhcp"
	"github.com/ironfleet/ironfleet/internal/boot/tftp"
)

// TFTPOpener is what the service's TFTP serves.
func (s *Service) TFTPOpener() tftp.Opener { return s.tftpOpener() }

// DHCPHandler is what decides the service's DHCP answers.
func (s *Service) DHCPHandler() *dhcp.Handler { return s.dhcpServer().Handler }

// CheckMedia is checkMedia for tests: whether an ignition the API server cannot hold (a
// Secret's data is at most 1 MiB) would make a virtual-media boot Ready.
func (s *Service) CheckMedia(sbc *metalv1alpha1.ServerBootConfiguration, data []byte) (ready bool, reason, message string) {
	v := s.checkMedia(sbc, data)
	return v.ready, v.reason, v.message
}

// Lease leases ip to mac in the service's DHCP lease table (full mode), as a DHCP REQUEST
// would.
func (s *Service) Lease(mac net.HardwareAddr, ip netip.Addr) bool {
	return s.leases.Commit(mac, ip)
}

// FirmwareFile is the file the image of a firmware URL's token is kept in.
func (s *Service) FirmwareFile(token string) string {
	return filepath.Join(s.cfg.FirmwareCacheDir, firmwareFileName(token))
}

// ReconcileFirmware reconciles a firmware image Secret now, as its controller does.
func (s *Service) ReconcileFirmware(ctx context.Context, req ctrl.Request) error {
	_, err := s.reconcileFirmware(ctx, req)
	return err
}
