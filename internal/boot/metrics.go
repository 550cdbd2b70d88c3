package boot

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// The boot service's metrics, on controller-runtime's registry so that the manager's /metrics
// serves them. Package-level: a registry takes each name once per process, however many
// services a test or the lab runs.
var (
	dhcpReplies = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "ironfleet_boot_dhcp_replies_total",
		Help: "DHCP replies sent, by mode (proxy, full) and message type (OFFER, ACK, NAK).",
	}, []string{"mode", "type"})
	dhcpIgnored = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "ironfleet_boot_dhcp_ignored_total",
		Help: "DHCP packets not answered, by reason (unknown_mac, not_pxe, malformed, ...).",
	}, []string{"reason"})
	tftpBytes = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "ironfleet_boot_tftp_sent_bytes_total",
		Help: "Bytes of iPXE binaries sent over TFTP.",
	})
	tftpErrors = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "ironfleet_boot_tftp_errors_total",
		Help: "TFTP packets refused, dropped or failed, by kind (refused, missing, write, transfer, stray, busy).",
	}, []string{"kind"})
	httpBytes = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "ironfleet_boot_http_sent_bytes_total",
		Help: "Bytes sent over HTTP, by kind (script, artifact, ignition, media: virtual-media ISOs, firmware: firmware images for BMCs).",
	}, []string{"kind"})
	httpErrors = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "ironfleet_boot_http_errors_total",
		Help: "HTTP requests answered with an error, by kind (not_found, forbidden, bad_request, too_large, method_not_allowed, bad_gateway: a firmware image not fetched or not verified, internal).",
	}, []string{"kind"})
	firmwareFetches = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "ironfleet_boot_firmware_fetches_total",
		Help: "Downloads of firmware images from their origins, by result (ok, checksum_mismatch, too_large, origin_error, invalid, internal).",
	}, []string{"result"})
	firmwareFetchedBytes = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "ironfleet_boot_firmware_fetched_bytes_total",
		Help: "Bytes of firmware images downloaded from their origins (every download, kept or not).",
	})
	bootsServed = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "ironfleet_boot_boots_served_total",
		Help: "Ignitions served to booted probes (one per boot that reached /init), by purpose.",
	}, []string{"purpose"})
)

func init() {
	metrics.Registry.MustRegister(dhcpReplies, dhcpIgnored, tftpBytes, tftpErrors, httpBytes, httpErrors, bootsServed,
		firmwareFetches, firmwareFetchedBytes)
}
