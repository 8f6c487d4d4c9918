package store

import (
	"context"
	"fmt"
	"time"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/internal/coded"
	"github.com/courier-go/courier/internal/wire"
)

// Contracts pins, per endpoint, the capabilities digest of the source
// contract its commands are built for.
//
// Every command delivery records the digest it was enqueued under. When an
// endpoint's pin changes while deliveries enqueued under another digest are
// unfinished, no delivery of that endpoint is claimed (its rows stay as they
// are, pending or retry_wait) and Outbox.Health reports blocked with code
// contract_changed, until the operator either pins the old digest again or
// calls FailMismatched, which fails those deliveries with contract_changed.
// A pin stays until Unpin removes it, which it does only while the pin holds
// nothing back.
//
// There is deliberately no action that accepts such deliveries under the
// new digest: the digest is part of their payload bytes, which are fixed at
// enqueue (and the source refuses a command built for another contract).
// Re-issue them under new request ids instead.
type Contracts struct{ s *Store }

// Contract is one endpoint's pin.
type Contract struct {
	Endpoint           string
	CapabilitiesSHA256 string
	PinnedAt           time.Time
	// Mismatched counts the endpoint's unfinished deliveries enqueued
	// under another digest: while it is not zero, the endpoint is held
	// back (pin their digest again, or FailMismatched).
	Mismatched int
}

// Pin sets endpoint's pinned capabilities digest (64 lowercase hex);
// endpoint is an absolute http or https URL, as commands are enqueued to
// (CommandParams.Endpoint). Pinning another digest than the current one
// while commands enqueued under it are unfinished holds the endpoint
// back; pinning it again resumes. A write the database refuses by a rule
// of its own (a trigger, a CHECK courier did not make) is
// CodeInvalidArgument: the row holds the digest given, and another digest
// may pass the rule.
func (c *Contracts) Pin(ctx context.Context, endpoint, capabilitiesSHA256 string) error {
	endpoint = normalEndpoint(endpoint)
	if err := checkContract(endpoint, capabilitiesSHA256); err != nil {
		return err
	}
	_, err := c.s.exec(ctx, c.s.writer, "contract_pin", map[string]any{
		"endpoint": endpoint, "capabilities_sha256": capabilitiesSHA256, "now": c.s.now(),
	})
	return wrapf(err, "pin contract")
}

// Get returns endpoint's pin, or CodeNotFound. An endpoint that is not
// an absolute http or https URL is CodeInvalidArgument ("" is
// CodeNotFound).
func (c *Contracts) Get(ctx context.Context, endpoint string) (Contract, error) {
	endpoint = normalEndpoint(endpoint)
	switch {
	case endpoint == "":
		return Contract{}, errNotFound
	case !validEndpoint(endpoint):
		return Contract{}, invalidEndpoint("Contracts.Get endpoint")
	}
	pins, err := c.list(ctx, endpoint)
	if err != nil {
		return Contract{}, err
	}
	if len(pins) == 0 {
		return Contract{}, errNotFound
	}
	return pins[0], nil
}

// List returns every endpoint's pin, by endpoint, each with its
// mismatched deliveries: what an operator looks at when Health says
// contract_changed. It reads and returns them all at once, and costs in
// step with them: a pin stays for every endpoint a command was ever
// enqueued for, some tens of megabytes of allocation at 50,000. The Admin
// reads a page at a time instead.
func (c *Contracts) List(ctx context.Context) ([]Contract, error) {
	return c.list(ctx, "")
}

// list reads the pins of contract_list: endpoint's, or every one for "".
func (c *Contracts) list(ctx context.Context, endpoint string) ([]Contract, error) {
	var rows []contractRow
	if err := c.s.selectRows(ctx, c.s.db, "contract_list", map[string]any{"endpoint": endpoint}, &rows); err != nil {
		return nil, err
	}
	return each(rows, contractRow.contract), nil
}

func (c *Contracts) get(ctx context.Context, x DBTX, endpoint string) (Contract, error) {
	r, err := getRow[contractRow](ctx, c.s, x, "contract_get", map[string]any{"endpoint": endpoint})
	if err != nil {
		return Contract{}, err
	}
	return Contract{Endpoint: endpoint, CapabilitiesSHA256: r.CapabilitiesSHA256, PinnedAt: fromMicros(r.PinnedAt)}, nil
}

// contractRow is a row of courier_contracts, with contract_list's count.
type contractRow struct {
	Endpoint           string `db:"endpoint"`
	CapabilitiesSHA256 string `db:"capabilities_sha256"`
	PinnedAt           int64  `db:"pinned_at"`
	Mismatched         int    `db:"mismatched"`
}

func (r contractRow) contract() Contract {
	return Contract{Endpoint: r.Endpoint, CapabilitiesSHA256: r.CapabilitiesSHA256, PinnedAt: fromMicros(r.PinnedAt), Mismatched: r.Mismatched}
}

// FailMismatched fails endpoint's waiting deliveries (pending or
// retry_wait) that were enqueued under another digest than its pin, with
// code contract_changed, and returns how many. Leased ones are in flight
// and settle as usual. Claiming for the endpoint resumes once none is left.
// An endpoint that is not an absolute http or https URL is
// CodeInvalidArgument. A write the database refuses by a rule of its own
// (a trigger, a CHECK courier did not make) is CodeInternal: the
// endpoint was not at fault.
func (c *Contracts) FailMismatched(ctx context.Context, endpoint string) (int, error) {
	endpoint = normalEndpoint(endpoint)
	if !validEndpoint(endpoint) {
		return 0, invalidEndpoint("FailMismatched endpoint")
	}
	res, err := c.s.exec(ctx, c.s.writer, "contract_fail_mismatched", map[string]any{"endpoint": endpoint, "now": c.s.now()})
	if err != nil {
		return 0, wrapf(refusedByTheDatabase(err), "fail mismatched")
	}
	n, err := res.RowsAffected()
	return int(n), wrapf(err, "fail mismatched")
}

// Unpin removes endpoint's pin, as if no command had been enqueued for
// it: the next command enqueued for it pins its own digest
// (EnqueueCommand), and the pin no longer makes the endpoint one the
// store knows (Endpoints.Resolve). It undoes a pin made in error, of a
// URL with a typo in it say, which nothing else removes.
//
// A pin that holds deliveries back (Contract.Mismatched is not zero:
// unfinished deliveries enqueued under another digest) stays, and Unpin
// is courier.CodeContractChanged: without the pin nothing would hold
// them back, and they would be sent beside the commands of the pinned
// digest, under two contracts at once, which is what a pin prevents.
// Resolve them first (Pin their digest again, or FailMismatched and let
// the leased ones settle), then unpin. So Unpin changes no delivery:
// unfinished commands under the pinned digest itself were not held back
// by it and go on as before, until a command enqueued under another
// digest pins that one, which holds them back.
//
// An endpoint with no pin is CodeNotFound; one that is not an absolute
// http or https URL is CodeInvalidArgument. A write the database refuses
// by a rule of its own (a trigger courier did not make) is CodeInternal:
// the endpoint was not at fault.
func (c *Contracts) Unpin(ctx context.Context, endpoint string) error {
	endpoint = normalEndpoint(endpoint)
	if !validEndpoint(endpoint) {
		return invalidEndpoint("Unpin endpoint")
	}
	for try := 1; ; try++ {
		res, err := c.s.exec(ctx, c.s.writer, "contract_unpin", map[string]any{"endpoint": endpoint})
		if err != nil {
			return wrapf(refusedByTheDatabase(err), "unpin contract")
		}
		if n, err := res.RowsAffected(); err != nil || n > 0 {
			return wrapf(err, "unpin contract")
		}
		// Nothing was removed: there is no pin, or it holds deliveries
		// back. One pinned again since, or whose last held-back delivery
		// ended since, holding none back, is removed by the next try; a
		// pin the delete leaves whatever it holds back is kept by a rule
		// of the database's own (a trigger that skips it).
		if try == unpinTries {
			return &coded.Error{Code: courier.CodeInternal, Msg: "store: the database kept the pin, though it holds no delivery back: a rule of its own (a trigger) skips the delete"}
		}
		pins, err := c.list(ctx, endpoint)
		switch {
		case err != nil:
			return wrapf(err, "unpin contract")
		case len(pins) == 0:
			return errNotFound
		case pins[0].Mismatched > 0:
			return &coded.Error{Code: courier.CodeContractChanged, Msg: fmt.Sprintf("store: the pin holds back %d of the endpoint's deliveries, "+
				"enqueued under another digest: pin their digest again (Contracts.Pin, courier contracts pin) or fail them "+
				"(Contracts.FailMismatched, courier contracts fail-mismatched), then unpin", pins[0].Mismatched)}
		}
	}
}

// unpinTries bounds Unpin's deletes of a pin that holds nothing back: each
// finds it gone, or held back, unless the pin changes between the delete
// and the read after it, which a few tries outlast.
const unpinTries = 3

// mismatched counts the unfinished deliveries enqueued under another digest
// than their endpoint's pin.
func (c *Contracts) mismatched(ctx context.Context, x DBTX) (int, error) {
	var n int
	err := c.s.scan(ctx, x, "contract_mismatched", nil, &n)
	return n, err
}

func checkContract(endpoint, digest string) error {
	switch {
	case !validEndpoint(endpoint):
		return invalidEndpoint("endpoint")
	case !wire.IsDigest(digest):
		return invalidArgument("capabilities digest must be 64 lowercase hex")
	}
	return nil
}
