package fsm

import (
	"context"

	metalv1alpha1 "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
)

// ClaimEvent is something that happened to a ServerClaim and may move its phase.
type ClaimEvent string

// The claim lifecycle's events.
const (
	// ClaimEventServerBound: a server now names this claim in spec.serverClaimRef.
	ClaimEventServerBound ClaimEvent = "serverBound"
	// ClaimEventServerLost: the server that held the claim is gone or names it no more.
	ClaimEventServerLost ClaimEvent = "serverLost"
	// ClaimEventDeleted: the claim was deleted.
	ClaimEventDeleted ClaimEvent = "deleted"
)

// ClaimEvents lists every claim event, in the table's order.
var ClaimEvents = []ClaimEvent{ClaimEventServerBound, ClaimEventServerLost, ClaimEventDeleted}

// ClaimPhases lists every claim phase.
var ClaimPhases = []metalv1alpha1.ClaimPhase{
	metalv1alpha1.ClaimPhasePending, metalv1alpha1.ClaimPhaseBound, metalv1alpha1.ClaimPhaseReleasing,
}

func claimPhases(p ...metalv1alpha1.ClaimPhase) []metalv1alpha1.ClaimPhase { return p }

// Claim is the ServerClaim lifecycle: the one place its phases are written down.
var Claim = Machine[metalv1alpha1.ClaimPhase, ClaimEvent, struct{}]{
	Kind: "ServerClaim", Field: "phase", Initial: metalv1alpha1.ClaimPhasePending,
	States: ClaimPhases, Events: ClaimEvents,
	Rows: []Row[metalv1alpha1.ClaimPhase, ClaimEvent, struct{}]{
		{Event: ClaimEventServerBound, From: claimPhases(metalv1alpha1.ClaimPhasePending), To: metalv1alpha1.ClaimPhaseBound,
			When: "an Available server matching the claim's spec (serverRef, serverSelector, minimum cores, memory, disk, bootMode) was taken: the claim recorded which " +
				"(status.serverRef, under an optimistic lock), then the server its claim reference. While none matches the claim " +
				"stays Pending with Bound=False NoMatchingServer: add a server, or loosen the claim"},
		{Event: ClaimEventServerLost, From: claimPhases(metalv1alpha1.ClaimPhaseBound), To: metalv1alpha1.ClaimPhasePending,
			When: "the server it held was deleted or no longer names it (Bound=False ServerLost): it binds again as soon as a server matches"},
		{Event: ClaimEventDeleted, From: claimPhases(metalv1alpha1.ClaimPhasePending, metalv1alpha1.ClaimPhaseBound), To: metalv1alpha1.ClaimPhaseReleasing,
			When: "the claim was deleted (Bound=False Releasing, written before its server is released: a Bound claim always holds " +
				"its server): its boot configuration goes, its server is released to Cleanup (wiped before it is pooled again), then " +
				"the claim's finalizer. A release that fails says why in the same condition, and is retried"},
	},
	Intro: `A ServerClaim moves between phases only by these events. The claim reconciler observes
which server holds the claim (from the server side), fires at most one event per reconcile, and
writes the claim's status once; Bound and Ready conditions say why, for people.`,
}

// NextClaimPhase returns the phase a claim in phase from moves to on event, or an error wrapping
// ErrRefused when the table has no such transition. An empty phase is the initial one.
func NextClaimPhase(ctx context.Context, from metalv1alpha1.ClaimPhase, event ClaimEvent) (metalv1alpha1.ClaimPhase, error) {
	if from == "" {
		from = Claim.Initial
	}
	return Claim.Next(ctx, from, event, struct{}{})
}
