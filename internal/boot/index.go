package boot

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"sort"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	metalv1alpha1 "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
	"github.com/ironfleet/ironfleet/internal/identity"
)

// Cache indexes the service keeps through the manager's watch. Everything a request is
// answered with is found through them: nothing about a boot lives in this process's memory,
// so a restart loses nothing and a deleted configuration is gone from them at once.
const (
	indexToken       = "boot.ironfleet.dev/token"       // SBC by its per-boot URL token
	indexBootID      = "boot.ironfleet.dev/boot-id"     // SBC by its public boot id (the ignition's URL)
	indexServerRef   = "boot.ironfleet.dev/server"      // SBC by spec.serverRef.name
	indexIgnitionRef = "boot.ironfleet.dev/ignition"    // SBC by spec.ignitionSecretRef.name
	indexMAC         = "boot.ironfleet.dev/mac"         // Server by each NIC's MAC (lower case)
	indexSystemUUID  = "boot.ironfleet.dev/system-uuid" // Server by spec.systemUUID (lower case), when usable
	// Secret asking for a firmware image, by the token of its URL (firmware.go)
	indexFirmwareToken = "boot.ironfleet.dev/firmware-token"
)

func (s *Service) indexFields(ctx context.Context, indexer client.FieldIndexer) error {
	sbc := &metalv1alpha1.ServerBootConfiguration{}
	for _, ix := range []struct {
		obj   client.Object
		field string
		fn    client.IndexerFunc
	}{
		{sbc, indexToken, func(o client.Object) []string {
			return []string{s.tokens.token(o.(*metalv1alpha1.ServerBootConfiguration))}
		}},
		{sbc, indexBootID, func(o client.Object) []string {
			return []string{s.tokens.id(o.(*metalv1alpha1.ServerBootConfiguration))}
		}},
		{sbc, indexServerRef, func(o client.Object) []string {
			return []string{o.(*metalv1alpha1.ServerBootConfiguration).Spec.ServerRef.Name}
		}},
		{sbc, indexIgnitionRef, func(o client.Object) []string {
			if ref := o.(*metalv1alpha1.ServerBootConfiguration).Spec.IgnitionSecretRef; ref != nil {
				return []string{ref.Name}
			}
			return nil
		}},
		{&corev1.Secret{}, indexFirmwareToken, func(o client.Object) []string {
			if !isFirmwareImage(o) {
				return nil
			}
			return []string{s.tokens.firmwareToken(o.(*corev1.Secret))}
		}},
		{&metalv1alpha1.Server{}, indexMAC, func(o client.Object) []string { return serverMACs(o.(*metalv1alpha1.Server)) }},
		{&metalv1alpha1.Server{}, indexSystemUUID, func(o client.Object) []string {
			if u := identity.Normalize(o.(*metalv1alpha1.Server).Spec.SystemUUID); identity.Usable(u) {
				return []string{u}
			}
			return nil
		}},
	} {
		if err := indexer.IndexField(ctx, ix.obj, ix.field, ix.fn); err != nil {
			return fmt.Errorf("indexing %s: %w", ix.field, err)
		}
	}
	return nil
}

// serverMACs are the MACs of a server's NICs, in the form net.HardwareAddr prints (lower case,
// colons), as its inventory knows them, and its spec.bootMACAddress (which servers of BMCs that
// list no NICs, IPMI ones, are given).
func serverMACs(server *metalv1alpha1.Server) []string {
	var macs []string
	add := func(s string) {
		if mac, err := net.ParseMAC(s); err == nil && len(mac) == 6 && !slices.Contains(macs, mac.String()) {
			macs = append(macs, mac.String())
		}
	}
	if server.Spec.BootMACAddress != "" {
		add(server.Spec.BootMACAddress)
	}
	if server.Status.Inventory != nil {
		for _, nic := range server.Status.Inventory.NetworkInterfaces {
			add(nic.MACAddress)
		}
	}
	sort.Strings(macs)
	return macs
}

// served says whether this service boots the server.
func (s *Service) served(server *metalv1alpha1.Server) bool {
	return s.cfg.ServerFilter == nil || s.cfg.ServerFilter(server)
}

// ours says whether a boot configuration is for this boot service (its boot-operator label).
func (s *Service) ours(sbc *metalv1alpha1.ServerBootConfiguration) bool {
	return metalv1alpha1.BootOperatorOf(sbc) == s.cfg.BootOperator
}

// servedNamespace says whether boot configurations in ns are this service's.
func (s *Service) servedNamespace(ns string) bool {
	return s.cfg.Namespace == "" || s.cfg.Namespace == ns
}

// ready says whether a boot configuration is served now.
func ready(sbc *metalv1alpha1.ServerBootConfiguration) bool {
	return sbc.DeletionTimestamp.IsZero() && sbc.Status.State == metalv1alpha1.BootConfigurationStateReady
}

// target is what one boot serves: a Ready configuration and its server.
type target struct {
	server *metalv1alpha1.Server
	sbc    *metalv1alpha1.ServerBootConfiguration
}

// targetByMAC is the boot a NIC's MAC is served, from the cache; nil when there is none.
func (s *Service) targetByMAC(ctx context.Context, mac net.HardwareAddr) (*target, error) {
	var servers metalv1alpha1.ServerList
	if err := s.client.List(ctx, &servers, client.MatchingFields{indexMAC: mac.String()}); err != nil {
		return nil, fmt.Errorf("listing servers by MAC: %w", err)
	}
	return s.targetOf(ctx, servers.Items)
}

// errSharedUUID: more than one Server has the UUID a host asked by, so the UUID does not say
// which one it is.
var errSharedUUID = errors.New("several servers have this UUID")

// targetByUUID is the boot a server is served, found by its SMBIOS UUID: only a UUID exactly
// one Server has (served by this service or not) finds one.
func (s *Service) targetByUUID(ctx context.Context, uuid string) (*target, error) {
	var servers metalv1alpha1.ServerList
	if err := s.client.List(ctx, &servers, client.MatchingFields{indexSystemUUID: identity.Normalize(uuid)}); err != nil {
		return nil, fmt.Errorf("listing servers by UUID: %w", err)
	}
	if len(servers.Items) > 1 {
		return nil, errSharedUUID
	}
	return s.targetOf(ctx, servers.Items)
}

// targetOf is the Ready boot of the first served server of servers that has one. When a
// server has more than one Ready configuration, the newest wins.
func (s *Service) targetOf(ctx context.Context, servers []metalv1alpha1.Server) (*target, error) {
	for i := range servers {
		server := &servers[i]
		if !s.served(server) {
			continue
		}
		var list metalv1alpha1.ServerBootConfigurationList
		opts := []client.ListOption{client.MatchingFields{indexServerRef: server.Name}}
		if s.cfg.Namespace != "" {
			opts = append(opts, client.InNamespace(s.cfg.Namespace))
		}
		if err := s.client.List(ctx, &list, opts...); err != nil {
			return nil, fmt.Errorf("listing the boot configurations of server %s: %w", server.Name, err)
		}
		var best *metalv1alpha1.ServerBootConfiguration
		for j := range list.Items {
			sbc := &list.Items[j]
			if !ready(sbc) || !s.ours(sbc) {
				continue
			}
			if best == nil || best.CreationTimestamp.Before(&sbc.CreationTimestamp) {
				best = sbc
			}
		}
		if best != nil {
			return &target{server: server, sbc: best}, nil
		}
	}
	return nil, nil
}

// bootByToken resolves a per-boot token to its configuration, as it is now: the cache index
// finds it, then it is read again from the API server, so that a configuration deleted or no
// longer Ready a moment ago is refused even if the cache has not caught up. nil when the token
// names no Ready boot this service serves.
func (s *Service) bootByToken(ctx context.Context, token string) (*target, error) {
	if len(token) != 43 { // base64 of a SHA-256 HMAC
		return nil, nil
	}
	return s.bootBy(ctx, indexToken, token, s.tokens.token)
}

// bootByID is bootByToken for a boot's public id (its ignition's URL).
func (s *Service) bootByID(ctx context.Context, id string) (*target, error) {
	if len(id) != bootIDLen {
		return nil, nil
	}
	return s.bootBy(ctx, indexBootID, id, s.tokens.id)
}

// bootBy resolves value of the index field (a token or an id, which mint makes of a
// configuration) to its configuration as the API server has it now.
func (s *Service) bootBy(ctx context.Context, field, value string, mint func(*metalv1alpha1.ServerBootConfiguration) string) (*target, error) {
	var list metalv1alpha1.ServerBootConfigurationList
	if err := s.client.List(ctx, &list, client.MatchingFields{field: value}); err != nil {
		return nil, fmt.Errorf("looking up a boot: %w", err)
	}
	for i := range list.Items {
		var sbc metalv1alpha1.ServerBootConfiguration
		err := s.api.Get(ctx, client.ObjectKeyFromObject(&list.Items[i]), &sbc)
		if client.IgnoreNotFound(err) != nil {
			return nil, fmt.Errorf("reading boot configuration %s: %w", list.Items[i].Name, err)
		}
		if err != nil || !ready(&sbc) || !s.ours(&sbc) || !s.servedNamespace(sbc.Namespace) || mint(&sbc) != value {
			continue
		}
		var server metalv1alpha1.Server
		if err := s.client.Get(ctx, client.ObjectKey{Name: sbc.Spec.ServerRef.Name}, &server); err != nil {
			if client.IgnoreNotFound(err) != nil {
				return nil, fmt.Errorf("reading server %s: %w", sbc.Spec.ServerRef.Name, err)
			}
			continue
		}
		if !s.served(&server) {
			continue
		}
		return &target{server: &server, sbc: &sbc}, nil
	}
	return nil, nil
}
