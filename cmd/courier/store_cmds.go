package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/ack"
	"github.com/courier-go/courier/internal/endpoint"
	"github.com/courier-go/courier/internal/listing"
	"github.com/courier-go/courier/internal/opsjson"
	"github.com/courier-go/courier/internal/pruning"
	"github.com/courier-go/courier/internal/wire"
	"github.com/courier-go/courier/store"
	"github.com/courier-go/courier/store/postgres"
	"github.com/courier-go/courier/store/sqlite"
)

// migrateCmd applies courier's migrations, or with -print writes their
// SQL for a team's own migration tool.
func migrateCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fl := flags("migrate", stderr, "-db …", "-print -db …|-engine sqlite|postgres")
	db := dbFlag(fl)
	printSQL := fl.Bool("print", false, "write every migration's SQL, in order, instead of applying them")
	engine := fl.String("engine", "", "with -print and no -db: the engine, sqlite or postgres")
	if err := parseFlags(fl, args, stderr); err != nil {
		return err
	}
	if *engine != "" && !*printSQL {
		return usageError(stderr, "courier migrate: -engine goes with -print: migrate applies to -db's engine")
	}
	if *printSQL {
		files, err := migrationsOf(*db, *engine, stderr)
		if err != nil {
			return err
		}
		return printMigrations(files, stdout)
	}
	d, err := openDB(*db) // first: it says a missing -db is required
	if err != nil {
		return err
	}
	defer d.Close()
	known, err := schemaOf() // the version this courier migrates to
	if err != nil {
		return err
	}
	was, _ := schemaVersion(ctx, d) // 0 with no courier_schema yet; Migrate meets any other failure
	// With nothing to apply, Migrate takes no write lock: on SQLite it
	// answers while a running application holds the writer.
	if err := store.Migrate(ctx, d); err != nil {
		return dbError(err)
	}
	now, err := schemaVersion(ctx, d)
	if err != nil {
		return dbError(err)
	}
	switch {
	case now > known:
		fmt.Fprintf(stdout, "schema version %d, newer than this courier's %d: nothing to apply "+
			"(a newer courier migrated; this one runs on its schema, see Upgrades in go doc store)\n", now, known)
	case now == was:
		fmt.Fprintf(stdout, "up to date: schema version %d\n", now)
	default:
		fmt.Fprintf(stdout, "migrated: schema version %d (was %d)\n", now, was)
	}
	return nil
}

// schemaVersion is the latest migration recorded in db's courier_schema.
// Both engines keep it alike: a row per migration applied, and negative
// rows that are not versions (see Upgrades in package store).
func schemaVersion(ctx context.Context, db *sqlx.DB) (int, error) {
	var v int
	err := db.GetContext(ctx, &v, "SELECT COALESCE(MAX(version), 0) FROM courier_schema")
	return v, err
}

// migrationsOf returns the migration files of the engine -db or -engine
// names; given both, they must name the same engine. A -db the other
// commands refuse (checkDB) names none.
func migrationsOf(db, engine string, stderr io.Writer) (fs.FS, error) {
	if db != "" {
		if err := checkDB(db); err != nil {
			return nil, err
		}
	}
	dbEngine := "sqlite"
	if isPostgres(db) {
		dbEngine = "postgres"
	}
	switch {
	case engine == "" && db == "":
		return nil, usageError(stderr, "courier migrate: -print needs -db or -engine")
	case engine != "" && engine != "sqlite" && engine != "postgres":
		return nil, usageError(stderr, "courier migrate: -engine must be sqlite or postgres")
	case engine != "" && db != "" && engine != dbEngine:
		return nil, usageError(stderr, "courier migrate: -engine %s, but -db names a %s database: give one of them", engine, dbEngine)
	case engine == "":
		engine = dbEngine
	}
	if engine == "postgres" {
		return postgres.Migrations(), nil
	}
	return sqlite.Migrations(), nil
}

// printMigrations writes the files of files in order, a blank line
// between two. Each begins with a comment naming it and ends by recording
// its version, so a tool may apply them one by one; store.Migrate skips
// what was applied.
func printMigrations(files fs.FS, w io.Writer) error {
	names, err := fs.Glob(files, "*.sql")
	if err != nil {
		return err
	}
	slices.Sort(names)
	for i, name := range names {
		b, err := fs.ReadFile(files, name)
		if err != nil {
			return err
		}
		if i > 0 {
			fmt.Fprintln(w)
		}
		fmt.Fprintf(w, "%s\n", bytes.TrimRight(b, "\n"))
	}
	return nil
}

// healthCmd prints the outbox's health, and how many endpoints' breakers
// are open, half open or disabled; blocked exits 3.
func healthCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	s, done, err := openWithDBFlag(ctx, "health", args, stderr)
	if err != nil {
		return err
	}
	defer done()
	h, err := s.Outbox.Health(ctx)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "status: %s", h.Status)
	if h.Code != "" {
		fmt.Fprintf(stdout, " (%s)", h.Code)
	}
	fmt.Fprintln(stdout)
	for _, st := range courier.Statuses() {
		fmt.Fprintf(stdout, "%s: %d\n", st, h.Counts[st])
	}
	fmt.Fprintf(stdout, "due: %d\nexpired leases: %d\noldest due age: %s\noverdue: %d\ncontract mismatches: %d\n",
		h.Due, h.ExpiredLeases, h.OldestDueAge.Round(time.Millisecond), h.Overdue, h.ContractMismatches)
	// A receiver that is down blocks nothing, and its backlog waits
	// parked, not due: its breaker says so (courier endpoints list names
	// it). Counted in the database, as the ops page counts them.
	states, err := listing.For[store.EndpointHealth, store.Contract](s).EndpointStates(ctx)
	if err != nil {
		return err
	}
	for _, st := range opsjson.NotClosed() {
		fmt.Fprintf(stdout, "endpoints %s: %d\n", st, states[string(st)])
	}
	if h.Status != store.HealthOK {
		return errBlocked
	}
	return nil
}

// openWithDBFlag parses the args of a command whose one flag is -db and
// opens its store.
func openWithDBFlag(ctx context.Context, name string, args []string, stderr io.Writer) (*store.Store, func(), error) {
	fs := flags(name, stderr, "-db …")
	db := dbFlag(fs)
	if err := parseFlags(fs, args, stderr); err != nil {
		return nil, nil, err
	}
	return openStore(ctx, *db, store.Config{})
}

// keysCmd prints, by payload key id, how many deliveries and inbox
// records are kept under each key (store.Store.KeysInUse), one
// "id: rows" line each, by id: a key retired from Current may leave every
// process's Encryption.Keys once it is not listed.
func keysCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	s, done, err := openWithDBFlag(ctx, "keys", args, stderr)
	if err != nil {
		return err
	}
	defer done()
	inUse, err := s.KeysInUse(ctx)
	if err != nil {
		return err
	}
	if len(inUse) == 0 {
		fmt.Fprintln(stdout, "no rows are kept under a payload key")
		return nil
	}
	for _, id := range slices.Sorted(maps.Keys(inUse)) {
		fmt.Fprintf(stdout, "%s: %d\n", id, inUse[id])
	}
	return nil
}

// deliveriesActions are the actions of courier deliveries, in the order
// its help lists them.
var deliveriesActions = []string{"list", "show", "redrive", "cancel"}

const deliveriesUsage = "usage: courier deliveries list|show|redrive|cancel -db … [flags] [id]"

// deliveriesSynopses say how to call each deliveries action.
var deliveriesSynopses = map[string][]string{
	"list":    {"-db … [flags]"},
	"show":    {"-db … <id>"},
	"redrive": {"-db … [flags] <id>", "-db … [flags] -endpoint-ref <ref>|-endpoint <url>"},
	"cancel":  {"-db … <id>", "-db … -endpoint-ref <ref>|-endpoint <url>"},
}

// redriveNote ends deliveries redrive's help: what a redrive risks.
const redriveNote = `A redriven delivery is sent again under the same notification id, however long after
it failed: a receiver that processed it once (a failed delivery may have been, its answer
lost) and has pruned its inbox record since runs it again. Redrive within the receivers'
inbox retention (courier prune -inbox-older-than, 168h by default), and look at the
delivery's attempts first (courier deliveries show <id>): a 2xx whose Ack did not verify
(ack_invalid) was processed.`

// deliveriesFlags are the flags of a deliveries action; those it does
// not take are nil. config is the Store's Config, which only redrive's
// flags set.
type deliveriesFlags struct {
	db, status, ref, notification, endpointRef, endpointURL *string
	limit                                                   *int
	before                                                  *int64
	dryRun                                                  *bool
	config                                                  *store.Config
}

// deliveriesFlagSet returns the flag set of a deliveries action.
func deliveriesFlagSet(action string, stderr io.Writer) (*flag.FlagSet, deliveriesFlags) {
	fs := flags("deliveries "+action, stderr, deliveriesSynopses[action]...)
	f := deliveriesFlags{db: dbFlag(fs), dryRun: new(bool), config: new(store.Config)}
	switch action {
	case "list":
		f.status = fs.String("status", "", "only deliveries in this status: "+statusNames())
		f.ref = fs.String("endpoint-ref", "", "only deliveries to this endpoint (its ref, as list shows it)")
		f.notification = fs.String("notification-id", "", "only this notification's deliveries, one per endpoint")
		f.limit = fs.Int("limit", 50, "at most this many, newest first (1..1000)")
		f.before = fs.Int64("before", 0, "only deliveries whose id is below this one: the next page, which list names when more match")
	case "redrive":
		usage := fs.Usage
		fs.Usage = func() {
			usage()
			fmt.Fprintln(stderr, redriveNote)
		}
		f.endpointRef = fs.String("endpoint-ref", "", "redrive every failed (or quarantined payload_unreadable) delivery of this endpoint (its ref)")
		f.endpointURL = fs.String("endpoint", "", "redrive every failed (or quarantined payload_unreadable) delivery of this endpoint (its URL; not with -endpoint-ref; one the database does not know exits 1)")
		// Redrive gives each delivery the budget and horizon of the Store
		// it runs on, and this Store is the tool's, not the application's.
		fs.IntVar(&f.config.MaxAttempts, "max-attempts", 0,
			"how many more attempts each redriven delivery gets, 1..1000; give the application's Store's Config.MaxAttempts (without it: 8, the default)")
		fs.DurationVar(&f.config.RetryHorizon, "retry-horizon", 0,
			"how long from now each redriven delivery may be attempted, 1s to 720h (30 days); give the application's Store's Config.RetryHorizon (without it: 72h, the default)")
		fs.BoolVar(f.dryRun, "dry-run", false, redriveDryRun)
	case "cancel":
		f.endpointRef = fs.String("endpoint-ref", "", "cancel every pending, retrying, failed or quarantined delivery of this endpoint (its ref), as for one gone for good; not with a delivery id")
		f.endpointURL = fs.String("endpoint", "", "cancel every pending, retrying, failed or quarantined delivery of this endpoint (its URL; not with -endpoint-ref nor a delivery id; one the database does not know exits 1)")
		fs.BoolVar(f.dryRun, "dry-run", false, "print how many the cancel would cancel (would cancel: n), or why it would leave the delivery, and change nothing; "+
			"a delivery claimed, finished or failed in between makes the cancel differ")
	}
	return fs, f
}

// deliveriesCmd lists, shows, redrives or cancels deliveries.
func deliveriesCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	switch {
	case len(args) == 0:
		return usageError(stderr, deliveriesUsage)
	case isHelp(args[0]):
		return actionsHelp(stderr, deliveriesUsage, deliveriesActions, func(action string) *flag.FlagSet {
			fs, _ := deliveriesFlagSet(action, stderr)
			return fs
		})
	case !slices.Contains(deliveriesActions, args[0]):
		return usageError(stderr, "courier deliveries: unknown action %s: list, show, redrive or cancel", quoteArg(args[0]))
	}
	fs, f := deliveriesFlagSet(args[0], stderr)
	var err error
	if args[0] == "list" {
		err = parseFlags(fs, args[1:], stderr)
	} else {
		err = parseArgs(fs, args[1:], 1, "flags, then a delivery id", stderr)
	}
	if err != nil {
		return err
	}
	if err := f.check(fs, stderr); err != nil {
		return err
	}
	s, done, err := openStore(ctx, *f.db, *f.config)
	if err != nil {
		return err
	}
	defer done()
	a := deliveriesAction{name: args[0], s: s, fs: fs, f: f, stdout: stdout, stderr: stderr}
	switch a.name {
	case "list":
		return a.list(ctx)
	case "show":
		return a.show(ctx)
	case "redrive":
		return a.redrive(ctx)
	default:
		return a.cancel(ctx)
	}
}

// redriveDryRun says what redrive -dry-run counts, and how the redrive
// after it may differ.
const redriveDryRun = "print how many the redrive would move (would redrive: n), or why it would leave the delivery, and change nothing: " +
	"the failed and quarantined payload_unreadable deliveries under 1,000 attempts; a failed command under another contract than its endpoint's pin, " +
	"which the redrive leaves, is counted all the same (stderr says when a command of a pinned endpoint is), " +
	"and a delivery that fails or is claimed in between makes the redrive differ"

// minRedriveHorizon is the shortest -retry-horizon a redrive takes. The
// Store takes any positive horizon, but one under a second is a mistake
// (a unit) rather than a plan: the redriven delivery would expire before
// a worker polling at its default interval (a second) claims it.
const minRedriveHorizon = time.Second

// check refuses the values of the flags, parsed by fs, that the Store
// would not take, a budget flag given as 0, which the Store would take
// for its default, and a -retry-horizon under minRedriveHorizon.
func (f deliveriesFlags) check(fs *flag.FlagSet, stderr io.Writer) error {
	given := make(map[string]bool)
	fs.Visit(func(fl *flag.Flag) { given[fl.Name] = true })
	if f.status != nil && *f.status != "" && !slices.Contains(courier.Statuses(), courier.Status(*f.status)) {
		return usageError(stderr, "courier deliveries list: -status %q is not a status: %s", *f.status, statusNames())
	}
	if f.limit != nil && (*f.limit < 1 || *f.limit > 1000) {
		return usageError(stderr, "courier deliveries list: -limit must be within 1..1000")
	}
	if f.before != nil && *f.before < 0 {
		return usageError(stderr, "courier deliveries list: -before must not be negative")
	}
	// As the store would refuse them, but naming the flag, not the
	// store's field.
	if f.notification != nil && *f.notification != "" && !wire.IsToken(*f.notification) {
		return usageError(stderr, "courier deliveries list: -notification-id must be %s (a notification id)", wire.TokenRule)
	}
	for _, ref := range []*string{f.ref, f.endpointRef} {
		if ref != nil && *ref != "" && !endpoint.IsRef(*ref) {
			return usageError(stderr, "%s: -endpoint-ref must be an endpoint's ref, %d lowercase hex, as courier endpoints list shows it", fs.Name(), endpoint.RefLen)
		}
	}
	if f.endpointURL != nil && *f.endpointURL != "" && !endpoint.Valid(*f.endpointURL) {
		return usageError(stderr, "%s: -endpoint must be %s (not shown: it may hold a credential)", fs.Name(), endpoint.Rule)
	}
	switch c := f.config; { // as store.Config takes them, 0 (not given) for the default
	case c.MaxAttempts < 0 || c.MaxAttempts > 1000 || given["max-attempts"] && c.MaxAttempts == 0:
		return usageError(stderr, "courier deliveries redrive: -max-attempts must be within 1..1000")
	case c.RetryHorizon < 0 || c.RetryHorizon > store.MaxHorizon || given["retry-horizon"] && c.RetryHorizon < minRedriveHorizon:
		return usageError(stderr, "courier deliveries redrive: -retry-horizon must be from 1s to 720h (30 days)")
	}
	return nil
}

// deliveriesAction is a deliveries action (name) to run on s, with its
// parsed flags.
type deliveriesAction struct {
	name           string
	s              *store.Store
	fs             *flag.FlagSet
	f              deliveriesFlags
	stdout, stderr io.Writer
}

// endpointNamed returns the URL of the endpoint the action's -endpoint or
// -endpoint-ref names, "" for neither; both at once is a usage error.
func (a deliveriesAction) endpointNamed(ctx context.Context) (string, error) {
	switch {
	case *a.f.endpointURL != "" && *a.f.endpointRef != "":
		return "", usageError(a.stderr, "courier deliveries %s: give -endpoint and -endpoint-ref not both: each names an endpoint", a.name)
	case *a.f.endpointRef != "":
		return resolveRef(ctx, a.s, *a.f.endpointRef)
	}
	return *a.f.endpointURL, nil
}

// id returns the delivery id the action was given.
func (a deliveriesAction) id() (int64, error) {
	if a.fs.NArg() != 1 {
		return 0, usageError(a.stderr, "courier deliveries %s: give one delivery id", a.name)
	}
	n, err := strconv.ParseInt(a.fs.Arg(0), 10, 64)
	if err != nil || n < 1 {
		return 0, usageError(a.stderr, "courier deliveries %s: %s is not a delivery id", a.name, quoteArg(a.fs.Arg(0)))
	}
	return n, nil
}

// list prints a page of deliveries, newest first, and when more match
// names the next page's -before on stderr, so that the table stays the
// whole of stdout. Each row's HELD says why a pending or retrying one
// waits although due (store.Delivery.Held: "key", behind an earlier
// delivery of its ordering key, a failed one holding the key being
// blocked; "endpoint", for room at its endpoint), LAST ERROR is
// courier's code, and REMOTE CODE the receiver's own from its
// problem+json refusal (each "-" when there is none), as show has them:
// none has spaces, so each cell is one word.
func (a deliveriesAction) list(ctx context.Context) error {
	p := store.ListParams{Status: courier.Status(*a.f.status), NotificationID: *a.f.notification, Limit: *a.f.limit, Before: *a.f.before}
	if *a.f.ref != "" {
		var err error
		if p.Endpoint, err = resolveRef(ctx, a.s, *a.f.ref); err != nil {
			return err
		}
	}
	page, err := a.s.Outbox.List(ctx, p)
	if err != nil {
		return err
	}
	err = table(a.stdout, "ID\tSTATUS\tHELD\tATTEMPTS\tNOTIFICATION\tENDPOINT\tENDPOINT REF\tLAST ERROR\tREMOTE CODE\tUPDATED", page.Deliveries,
		func(d store.Delivery) string {
			return fmt.Sprintf("%d\t%s\t%s\t%d/%d\t%s\t%s\t%s\t%s\t%s\t%s", d.ID, d.Status, orDash(string(d.Held)), d.Attempts, d.MaxAttempts,
				d.NotificationID, endpoint.Redact(d.Endpoint), endpoint.Ref(d.Endpoint), orDash(string(d.LastErrorCode)),
				orDash(string(d.LastRemoteCode)), d.UpdatedAt.UTC().Format(time.RFC3339))
		})
	if err != nil {
		return err
	}
	if page.NextBefore != 0 {
		fmt.Fprintf(a.stderr, "courier deliveries list: more deliveries match: list the next page with -before %d\n", page.NextBefore)
	}
	return nil
}

// show prints a delivery and its attempts as JSON, as the admin API's
// GET /api/deliveries/{id} does: no payload, the endpoint redacted and
// named by its ref, times in UTC.
func (a deliveriesAction) show(ctx context.Context) error {
	n, err := a.id()
	if err != nil {
		return err
	}
	d, err := a.get(ctx, n)
	if err != nil {
		return err
	}
	attempts, err := a.s.Outbox.Attempts(ctx, n)
	if err != nil {
		return err
	}
	out, _ := json.MarshalIndent(opsjson.NewDeliveryDetail(d, attempts), "", "  ")
	fmt.Fprintln(a.stdout, string(out))
	return nil
}

// redrive redrives one delivery, or an endpoint's. A delivery id it
// does not redrive is a failure that says why, as it is for cancel. A
// redrive that fails after moving some prints how many before failing:
// those stay moved, and redriving again takes the rest.
func (a deliveriesAction) redrive(ctx context.Context) error {
	var p store.RedriveParams
	var err error
	if p.Endpoint, err = a.endpointNamed(ctx); err != nil {
		return err
	}
	if a.fs.NArg() > 0 {
		if p.ID, err = a.id(); err != nil {
			return err
		}
	}
	if p.ID == 0 && p.Endpoint == "" {
		return usageError(a.stderr, "courier deliveries redrive: give a delivery id, -endpoint-ref or -endpoint")
	}
	moved, redrive := "redriven", a.s.Outbox.Redrive
	if *a.f.dryRun {
		moved, redrive = "would redrive", a.wouldRedrive
	}
	n, err := redrive(ctx, p)
	if err != nil {
		if n > 0 { // batches committed before the error stay moved
			fmt.Fprintf(a.stdout, "%s: %d\n", moved, n)
		}
		return err
	}
	if n == 0 && p.ID == 0 && *a.f.endpointURL != "" {
		// A known endpoint with nothing to redrive is no failure; a URL
		// the database does not know (a typo in its path) is, as for
		// endpoints enable, so that the endpoint meant is not taken for
		// one with nothing failed.
		if err := mustKnow(ctx, a.s, p.Endpoint, "; nothing to redrive"); err != nil {
			return err
		}
	}
	if n == 0 && p.ID != 0 { // an endpoint with nothing to redrive is no failure
		d, err := a.get(ctx, p.ID)
		if err != nil {
			return err
		}
		return notRedriven(d, p)
	}
	fmt.Fprintf(a.stdout, "%s: %d\n", moved, n)
	if n > 0 { // nothing moved is nothing waiting
		a.warnDisabled(ctx, p)
	}
	return nil
}

// notRedriven says why Redrive of p did not move d, delivery p.ID.
func notRedriven(d store.Delivery, p store.RedriveParams) error {
	switch {
	case d.Status == courier.StatusQuarantined && !d.Redrivable():
		return fmt.Errorf("delivery %d is quarantined %s, not failed or payload_unreadable: cancel it", p.ID, string(d.LastErrorCode))
	case !d.Redrivable():
		return fmt.Errorf("delivery %d is %s, not failed", p.ID, d.Status)
	case !ofEndpoint(d, p.Endpoint):
		return fmt.Errorf("delivery %d is not of the endpoint given", p.ID)
	default:
		return fmt.Errorf("delivery %d was not redriven: it has made 1,000 attempts, or is a command under another contract than its endpoint's pin", p.ID)
	}
}

// maxAttempts is the most attempts any delivery may make: Redrive leaves
// one that has made them.
const maxAttempts = 1000

// ofEndpoint reports whether d is stored under url as typed or as the
// store keeps it, as Redrive takes it ("" for any).
func ofEndpoint(d store.Delivery, url string) bool {
	return url == "" || d.Endpoint == url || d.Endpoint == endpoint.Normalize(url)
}

// wouldRedrive counts the deliveries Redrive of p would move, and moves
// none: those Redrivable, under maxAttempts, of p's endpoint, read by
// store.Outbox.List. A command under another contract than its
// endpoint's pin, which Redrive leaves, is counted, its digest being in
// a payload the tool may not open: stderr says when a counted command's
// endpoint has a pin.
func (a deliveriesAction) wouldRedrive(ctx context.Context, p store.RedriveParams) (int, error) {
	n, pinned := 0, map[string]bool{}
	count := func(d store.Delivery) error {
		if !d.Redrivable() || d.Attempts >= maxAttempts || !ofEndpoint(d, p.Endpoint) {
			return nil
		}
		n++
		if d.Profile != ack.ProfileCommand {
			return nil
		}
		if _, seen := pinned[d.Endpoint]; !seen {
			_, err := a.s.Contracts.Get(ctx, d.Endpoint)
			if err != nil && !errors.Is(err, courier.CodeNotFound) {
				return err
			}
			pinned[d.Endpoint] = err == nil
		}
		return nil
	}
	var err error
	if p.ID != 0 {
		var d store.Delivery
		if d, err = a.get(ctx, p.ID); err == nil {
			err = count(d)
		}
	} else {
		for _, st := range []courier.Status{courier.StatusFailed, courier.StatusQuarantined} {
			if err = opsjson.EachDelivery(ctx, a.s, store.ListParams{Endpoint: p.Endpoint, Status: st}, count); err != nil {
				break
			}
		}
	}
	if err != nil {
		return 0, err
	}
	for url, pin := range pinned {
		if pin {
			fmt.Fprintf(a.stderr, "courier deliveries redrive: counted commands of %s, which has a contract pin: one enqueued under another contract than the pin is left by the redrive\n", endpointText(url))
		}
	}
	return n, nil
}

// warnDisabled warns on stderr when the endpoint of what p redrove is
// disabled: its deliveries are pending again, and wait there, unsent,
// until it is enabled. The redrive is done: a read that fails here
// warns of nothing rather than fail the command.
func (a deliveriesAction) warnDisabled(ctx context.Context, p store.RedriveParams) {
	url := p.Endpoint
	if url == "" {
		d, err := a.get(ctx, p.ID)
		if err != nil {
			return
		}
		url = d.Endpoint
	}
	if h, err := a.s.Endpoints.Get(ctx, url); err == nil && h.State == store.EndpointDisabled {
		waits := "what was redriven waits"
		if *a.f.dryRun {
			waits = "what would be redriven would wait"
		}
		fmt.Fprintf(a.stderr, "courier deliveries redrive: %s is disabled: %s until it is enabled (courier endpoints enable %s)\n",
			endpointText(h.Endpoint), waits, endpoint.Ref(h.Endpoint))
	}
}

// cancel cancels a delivery, and says why when Cancel did not take it:
// it answers not found for a delivery in a state it does not take too.
// Given an endpoint, it cancels the endpoint's deliveries instead.
func (a deliveriesAction) cancel(ctx context.Context) error {
	if *a.f.endpointURL != "" || *a.f.endpointRef != "" {
		return a.cancelEndpoint(ctx)
	}
	n, err := a.id()
	if err != nil {
		return err
	}
	cancelled, cancel := "cancelled", a.s.Outbox.Cancel
	if *a.f.dryRun {
		cancelled, cancel = "would cancel", a.wouldCancel
	}
	if err := cancel(ctx, n); err != nil {
		if !errors.Is(err, courier.CodeNotFound) {
			return err
		}
		d, err := a.get(ctx, n)
		if err != nil {
			return err
		}
		return fmt.Errorf("delivery %d is %s: only a %s, %s, %s or %s delivery can be cancelled", n, d.Status,
			courier.StatusPending, courier.StatusRetryWait, courier.StatusFailed, courier.StatusQuarantined)
	}
	fmt.Fprintf(a.stdout, "%s: 1\n", cancelled) // a count, as every form of cancel and redrive prints
	return nil
}

// wouldCancel answers as Cancel of delivery id would, and cancels
// nothing: not found for one in a status Cancel does not take.
func (a deliveriesAction) wouldCancel(ctx context.Context, id int64) error {
	d, err := a.get(ctx, id)
	if err == nil && !opsjson.Cancellable(d.Status) {
		err = courier.CodeNotFound
	}
	return err
}

// cancelEndpoint cancels every delivery of the endpoint -endpoint or
// -endpoint-ref names that Cancel takes (opsjson.CancelEndpoint) and
// prints how many. One that fails part-way prints how many it cancelled
// before failing: those stay cancelled, and cancelling again takes the
// rest. An endpoint with nothing to cancel is no failure; one the
// database does not know is, as for redrive.
func (a deliveriesAction) cancelEndpoint(ctx context.Context) error {
	if a.fs.NArg() > 0 {
		return usageError(a.stderr, "courier deliveries cancel: give a delivery id or an endpoint, not both")
	}
	url, err := a.endpointNamed(ctx)
	if err != nil {
		return err
	}
	cancelled, cancel := "cancelled", opsjson.CancelEndpoint
	if *a.f.dryRun {
		cancelled, cancel = "would cancel", opsjson.CountCancellable
	}
	n, err := cancel(ctx, a.s, url)
	if err != nil {
		if n > 0 { // those cancelled before the error stay cancelled
			fmt.Fprintf(a.stdout, "%s: %d\n", cancelled, n)
		}
		return err
	}
	if n == 0 && *a.f.endpointURL != "" {
		// A URL the database does not know (a typo in its path) is no
		// endpoint with nothing to cancel.
		if err := mustKnow(ctx, a.s, url, "; nothing to cancel"); err != nil {
			return err
		}
	}
	fmt.Fprintf(a.stdout, "%s: %d\n", cancelled, n)
	return nil
}

// get reads delivery id, for show or to say why an action did not take
// it, without its payload (a page of it, by store.ListParams.ID): none of
// them prints one, and it may be 4 MiB.
func (a deliveriesAction) get(ctx context.Context, id int64) (store.Delivery, error) {
	page, err := a.s.Outbox.List(ctx, store.ListParams{ID: id, Limit: 1})
	switch {
	case err != nil:
		return store.Delivery{}, err
	case len(page.Deliveries) == 0:
		return store.Delivery{}, fmt.Errorf("delivery %d not found", id)
	}
	return page.Deliveries[0], nil
}

// endpointsActions are the actions of courier endpoints, in the order its
// help lists them.
var endpointsActions = []string{"list", "blocked", "enable", "disable", "limit"}

const endpointsUsage = `usage: courier endpoints list|blocked|enable|disable|limit -db … [url-or-ref]
blocked lists the ordering keys a failed delivery holds, each with that delivery (redrive or cancel it to let the others go)
limit replaces the endpoint's limits: -max-in-flight and -rate are both required (0 for no limit), -burst optional; -clear removes them all`

// endpointsSynopses say how to call each endpoints action.
var endpointsSynopses = map[string][]string{
	"list":    {"-db …"},
	"blocked": {"-db … [url-or-ref]"},
	"enable":  {"-db … <url-or-ref>"},
	"disable": {"-db … <url-or-ref>"},
	"limit":   {"-db … -max-in-flight <n> -rate <per-second> [-burst <n>] <url-or-ref>", "-db … -clear <url-or-ref>"},
}

// limitFlags are the flags of endpoints limit that give a limit.
var limitFlags = []string{"max-in-flight", "rate", "burst"}

// endpointsFlagSet returns the flag set of an endpoints action, with its
// -db, for limit the limits it sets and its -clear, and for disable its
// -dry-run.
func endpointsFlagSet(action string, stderr io.Writer) (*flag.FlagSet, *string, *store.Limits, *bool, *bool) {
	fs := flags("endpoints "+action, stderr, endpointsSynopses[action]...)
	db := dbFlag(fs)
	limits, clearAll, dryRun := new(store.Limits), new(bool), new(bool)
	if action == "disable" {
		fs.BoolVar(dryRun, "dry-run", false, "print what disable would do (would disable: the endpoint, or already disabled), and change nothing")
	}
	if action == "limit" {
		fs.IntVar(&limits.MaxInFlight, "max-in-flight", 0, "the most deliveries to it in flight at once, across every worker (required; 0: no limit)")
		fs.Float64Var(&limits.Rate, "rate", 0, "requests per second (required; 0: no limit)")
		fs.IntVar(&limits.Burst, "burst", 0, "how many may start at once after a quiet spell (default: the rate rounded up)")
		fs.BoolVar(clearAll, "clear", false, "remove every limit of the endpoint, with no limit flag (limit with neither a limit flag nor -clear is refused)")
	}
	return fs, db, limits, clearAll, dryRun
}

// checkLimitFlags refuses endpoints limit without a limit flag and
// without -clear, or with both: an endpoint loses its limits only when
// asked to in so many words. Without -clear, -max-in-flight and -rate are
// both required: limit replaces the endpoint's limits, so a command line
// meant to change one would remove the other (as the admin API's limits
// body requires both).
func checkLimitFlags(fs *flag.FlagSet, l store.Limits, clearAll bool, stderr io.Writer) error {
	var given []string
	fs.Visit(func(f *flag.Flag) {
		if slices.Contains(limitFlags, f.Name) {
			given = append(given, f.Name)
		}
	})
	switch {
	case len(given) == 0 && !clearAll:
		return usageError(stderr, "courier endpoints limit: give -max-in-flight and -rate (0 for no limit), or -clear to remove the endpoint's limits")
	case len(given) > 0 && clearAll:
		return usageError(stderr, "courier endpoints limit: -clear removes every limit: give it without -max-in-flight, -rate or -burst")
	case !clearAll && (!slices.Contains(given, "max-in-flight") || !slices.Contains(given, "rate")):
		return usageError(stderr, "courier endpoints limit: give both -max-in-flight and -rate (0 for no limit): limit replaces the endpoint's limits, and one left out would be removed")
	}
	// As the store would refuse them, but naming the flag, not the
	// store's field.
	if faults := endpoint.LimitFaults(l.MaxInFlight, l.Rate, l.Burst); len(faults) > 0 {
		return usageError(stderr, "courier endpoints limit: %s", limitFaultText[faults[0]])
	}
	return nil
}

// limitFaultText says each endpoint.LimitFault in the flags' words.
var limitFaultText = map[endpoint.LimitFault]string{
	{Field: "max_in_flight", Rule: "min"}:      "-max-in-flight must not be negative",
	{Field: "max_in_flight", Rule: "max"}:      fmt.Sprintf("-max-in-flight must be at most %d", endpoint.MaxLimitInFlight),
	{Field: "rate", Rule: "min"}:               fmt.Sprintf("-rate must be 0 (no limit) or at least %g per second", endpoint.MinLimitRate),
	{Field: "rate", Rule: "max"}:               fmt.Sprintf("-rate must be at most %d per second", endpoint.MaxLimitRate),
	{Field: "burst", Rule: "min"}:              "-burst must not be negative",
	{Field: "burst", Rule: "max"}:              fmt.Sprintf("-burst must be at most %d", endpoint.MaxLimitBurst),
	{Field: "burst", Rule: "excluded_without"}: "-burst needs a -rate above 0",
}

// endpointsCmd lists endpoints with something to show, enables or
// disables one (by URL or ref), or sets its limits.
func endpointsCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	switch {
	case len(args) == 0:
		return usageError(stderr, endpointsUsage)
	case isHelp(args[0]):
		return actionsHelp(stderr, endpointsUsage, endpointsActions, func(action string) *flag.FlagSet {
			fs, _, _, _, _ := endpointsFlagSet(action, stderr)
			return fs
		})
	case !slices.Contains(endpointsActions, args[0]):
		return usageError(stderr, "courier endpoints: unknown action %s: list, blocked, enable, disable or limit", quoteArg(args[0]))
	}
	action := args[0]
	fs, db, limits, clearAll, dryRun := endpointsFlagSet(action, stderr)
	var err error
	if action == "list" {
		err = parseFlags(fs, args[1:], stderr)
	} else {
		err = parseArgs(fs, args[1:], 1, "flags, then an endpoint's URL or ref", stderr)
	}
	if err != nil {
		return err
	}
	if action == "limit" {
		if err := checkLimitFlags(fs, *limits, *clearAll, stderr); err != nil {
			return err
		}
	}
	s, done, err := openStore(ctx, *db, store.Config{})
	if err != nil {
		return err
	}
	defer done()
	if action == "list" {
		hs, err := s.Endpoints.List(ctx)
		if err != nil {
			return err
		}
		return table(stdout, "ENDPOINT\tREF\tSTATE\tFAILURES\tREASON\tIN FLIGHT\tLIMITS\tBLOCKED KEYS", hs, func(h store.EndpointHealth) string {
			return fmt.Sprintf("%s\t%s\t%s\t%d\t%s\t%d\t%s\t%d", endpoint.Redact(h.Endpoint), endpoint.Ref(h.Endpoint), h.State,
				h.ConsecutiveFailures, orDash(string(h.Reason)), h.InFlight, limitsText(h.Limits), h.BlockedKeys)
		})
	}
	if action == "blocked" {
		return blockedKeys(ctx, s, fs.Arg(0), stdout, stderr)
	}
	if fs.NArg() != 1 {
		return usageError(stderr, "courier endpoints %s: give the endpoint's URL or ref", action)
	}
	url, err := resolve(ctx, s, fs.Arg(0))
	if err != nil {
		return err
	}
	// The state before says whether the action changed anything. An enable
	// of a URL with a typo in its path finds a breaker that was never
	// disabled, of an endpoint the store does not know: a failure, as for
	// a ref that names none, so that the operator, or a script, does not
	// take the endpoint meant for enabled; so is a limit -clear, which has
	// nothing to clear. A disable or a limit of an endpoint not known yet
	// holds back the deliveries to come (store.Endpoints.Disable,
	// SetLimits): each is done, and says on stderr that the database knew
	// no such endpoint.
	before, err := s.Endpoints.Get(ctx, url)
	if err != nil {
		return err
	}
	known := true
	if before.State == store.EndpointClosed {
		if known, err = opsjson.Known(ctx, s, url, before.Endpoint); err != nil {
			return err
		}
	}
	unknown := unknownEndpoint(before.Endpoint)
	if action == "limit" {
		if *clearAll && !known {
			return errors.New(unknown + "; nothing to clear")
		}
		if err := s.Endpoints.SetLimits(ctx, url, *limits); err != nil {
			return err
		}
		h, err := s.Endpoints.Get(ctx, url)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "limits of %s: %s\n", endpointText(h.Endpoint), limitsText(h.Limits))
		if !known {
			fmt.Fprintf(stderr, "courier endpoints limit: %s: limited ahead of its deliveries; check the URL (limit -clear undoes it)\n", unknown)
		}
		return nil
	}
	if action == "enable" && !known {
		return errors.New(unknown + "; nothing to enable")
	}
	// A dry run of disable reads before and known only, as the disable
	// does, and says what it would do in the disable's words.
	disabled := "disabled"
	switch {
	case action == "enable":
		err = s.Endpoints.Enable(ctx, url)
	case *dryRun:
		disabled = "would be disabled"
	default:
		err = s.Endpoints.Disable(ctx, url)
	}
	if err != nil {
		return err
	}
	switch {
	case action == "enable" && before.State == store.EndpointClosed:
		fmt.Fprintf(stdout, "already enabled: %s: it was not disabled or paused\n", endpointText(before.Endpoint))
	case action == "enable":
		fmt.Fprintf(stdout, "enabled: %s, which was %s\n", endpointText(before.Endpoint), before.State)
	case before.State == store.EndpointDisabled:
		fmt.Fprintf(stdout, "already disabled: %s\n", endpointText(before.Endpoint))
	default:
		if *dryRun {
			fmt.Fprintf(stdout, "would disable: %s\n", endpointText(before.Endpoint))
		} else {
			fmt.Fprintf(stdout, "disabled: %s\n", endpointText(before.Endpoint))
		}
		if !known { // a typo disables an endpoint no one sends to, and the one meant goes on
			fmt.Fprintf(stderr, "courier endpoints disable: %s: %s ahead of its deliveries; check the URL (courier endpoints enable undoes it)\n", unknown, disabled)
		}
	}
	return nil
}

// table writes header, then a line for each of items as row writes it
// (tab-separated cells), to w in aligned columns: the command's listings.
func table[T any](w io.Writer, header string, items []T, row func(T) string) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, header)
	for _, it := range items {
		fmt.Fprintln(tw, row(it))
	}
	return tw.Flush()
}

// mustKnow fails, saying so (unknownEndpoint) and then more, when the
// database knows no endpoint at url (see opsjson.KnownEndpoint): a URL
// with a typo in it is not taken for a known endpoint with nothing to act
// on.
func mustKnow(ctx context.Context, s *store.Store, url, more string) error {
	kept, known, err := opsjson.KnownEndpoint(ctx, s, url)
	switch {
	case err != nil:
		return err
	case !known:
		return errors.New(unknownEndpoint(kept) + more)
	}
	return nil
}

// unknownEndpoint says that the database knows no endpoint at url (as the
// store keeps it; see opsjson.KnownEndpoint).
func unknownEndpoint(url string) string {
	return fmt.Sprintf("no endpoint the database knows is %s: no deliveries, breaker, limits, subscription or contract pin", endpointText(url))
}

// endpointText names an endpoint in a line of output: redacted, and by
// its ref, as list shows it, which tells apart two endpoints that redact
// alike (two webhooks of one service; see endpoint.Redact).
func endpointText(url string) string {
	return fmt.Sprintf("%s (ref %s)", endpoint.Redact(url), endpoint.Ref(url))
}

// limitsText says an endpoint's limits in a few words.
func limitsText(l store.Limits) string {
	var parts []string
	if l.MaxInFlight > 0 {
		parts = append(parts, fmt.Sprintf("max %d in flight", l.MaxInFlight))
	}
	if l.Rate > 0 {
		parts = append(parts, fmt.Sprintf("%g/s burst %d", l.Rate, l.Burst))
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, ", ")
}

// blockedMax is how many blocked keys endpoints blocked shows.
const blockedMax = 1000

// blockedKeys prints the ordering keys a failed delivery holds, of the
// endpoint urlOrRef names or of every endpoint (""), each with the
// delivery holding it: the one an operator redrives or cancels to let
// the deliveries behind it go. When there may be more, stderr says so.
func blockedKeys(ctx context.Context, s *store.Store, urlOrRef string, stdout, stderr io.Writer) error {
	var url string
	if urlOrRef != "" {
		var err error
		if url, err = resolve(ctx, s, urlOrRef); err != nil {
			return err
		}
		if err := mustKnow(ctx, s, url, ""); err != nil { // a ref names a known one: a URL with a typo in it
			return err
		}
	}
	keys, err := s.Endpoints.BlockedKeys(ctx, url, blockedMax)
	if err != nil {
		return err
	}
	err = table(stdout, "HEAD\tENDPOINT\tREF\tORDERING KEY\tSINCE", keys, func(k store.BlockedKey) string {
		return fmt.Sprintf("%d\t%s\t%s\t%s\t%s", k.Head, endpoint.Redact(k.Endpoint), endpoint.Ref(k.Endpoint), k.OrderingKey,
			k.Since.UTC().Format(time.RFC3339))
	})
	if err != nil {
		return err
	}
	if len(keys) == blockedMax {
		fmt.Fprintf(stderr, "courier endpoints blocked: the first %d keys, by endpoint and key; name an endpoint for its own\n", blockedMax)
	}
	return nil
}

// contractsListMax is how many pins contracts list shows: those that most
// need an operator, as the ops page shows them.
const contractsListMax = 100

// contractsList prints the contract pins that most need an operator,
// those holding deliveries back first, each by its ref with its URL
// redacted: what courier health's contract_changed asks an operator to
// resolve with pin or fail-mismatched. When there are more, stderr says
// how many.
func contractsList(ctx context.Context, s *store.Store, stdout, stderr io.Writer) error {
	top, count, holding, err := listing.For[store.EndpointHealth, store.Contract](s).ContractTop(ctx, contractsListMax)
	if err != nil {
		return err
	}
	err = table(stdout, "ENDPOINT\tREF\tCAPABILITIES SHA256\tPINNED\tMISMATCHED", top, func(c store.Contract) string {
		return fmt.Sprintf("%s\t%s\t%s\t%s\t%d", endpoint.Redact(c.Endpoint), endpoint.Ref(c.Endpoint), c.CapabilitiesSHA256,
			c.PinnedAt.UTC().Format(time.RFC3339), c.Mismatched)
	})
	if err != nil {
		return err
	}
	if count > len(top) {
		fmt.Fprintf(stderr, "courier contracts list: %d pins, %d holding deliveries back; these are the %d that most need an operator\n", count, holding, len(top))
	}
	return nil
}

// contractsCmd lists the contract pins, pins an endpoint's capabilities
// digest or removes its pin, or fails the commands enqueued under another
// digest than its pin.
func contractsCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	const usage = "usage: courier contracts list -db … | courier contracts pin -db … <url-or-ref> <capabilities-sha256> | " +
		"courier contracts unpin -db … <url-or-ref> | courier contracts fail-mismatched -db … <url-or-ref>"
	actions := []string{"list", "pin", "unpin", "fail-mismatched"}
	synopses := map[string]string{"list": "-db …", "pin": "-db … <url-or-ref> <capabilities-sha256>", "unpin": "-db … <url-or-ref>", "fail-mismatched": "-db … <url-or-ref>"}
	dryRun := new(bool)
	flagSet := func(action string) (*flag.FlagSet, *string) {
		fs := flags("contracts "+action, stderr, synopses[action])
		db := dbFlag(fs)
		if action == "fail-mismatched" {
			fs.BoolVar(dryRun, "dry-run", false, failMismatchedDryRun)
		}
		return fs, db
	}
	switch {
	case len(args) > 0 && isHelp(args[0]):
		return actionsHelp(stderr, usage, actions, func(action string) *flag.FlagSet {
			fs, _ := flagSet(action)
			return fs
		})
	case len(args) == 0 || !slices.Contains(actions, args[0]):
		return usageError(stderr, usage)
	}
	action := args[0]
	fs, db := flagSet(action)
	if err := parse(fs, args[1:]); err != nil {
		return err
	}
	if action == "list" && fs.NArg() > 0 {
		return usageError(stderr, "courier contracts list: unexpected argument %s (it takes flags only; the flags after it were not read)", quoteArg(fs.Arg(0)))
	}
	if want := map[string]int{"list": 0, "pin": 2, "unpin": 1, "fail-mismatched": 1}[action]; fs.NArg() != want {
		what := map[string]string{"pin": "the endpoint's URL or ref, then its capabilities digest", "unpin": "the endpoint's URL or ref", "fail-mismatched": "the endpoint's URL or ref"}[action]
		return usageError(stderr, "courier contracts %s: give %s, after the flags", action, what)
	}
	if action == "pin" && !wire.IsDigest(fs.Arg(1)) { // as the store would refuse it, naming the argument
		return usageError(stderr, "courier contracts pin: the capabilities digest must be 64 lowercase hex (a SHA-256)")
	}
	s, done, err := openStore(ctx, *db, store.Config{})
	if err != nil {
		return err
	}
	defer done()
	if action == "list" {
		return contractsList(ctx, s, stdout, stderr)
	}
	url, err := resolve(ctx, s, fs.Arg(0))
	if err != nil {
		return err
	}
	switch action {
	case "pin":
		return contractsPin(ctx, s, url, fs.Arg(1), stdout, stderr)
	case "unpin":
		return contractsUnpin(ctx, s, url, stdout)
	}
	failed, failMismatched := "failed", s.Contracts.FailMismatched
	if *dryRun {
		failed, failMismatched = "would fail", func(ctx context.Context, url string) (int, error) { return wouldFailMismatched(ctx, s, url, stderr) }
	}
	n, err := failMismatched(ctx, url)
	if err != nil {
		return err
	}
	if n == 0 {
		// A URL the database does not know (a typo in its path) is no
		// endpoint with nothing mismatched, as for deliveries cancel: the
		// one meant still holds its commands back.
		if err := mustKnow(ctx, s, url, "; nothing to fail"); err != nil {
			return err
		}
	}
	fmt.Fprintf(stdout, "%s: %d\n", failed, n)
	return nil
}

// failMismatchedDryRun says what fail-mismatched -dry-run counts, and
// how the run after it may differ.
const failMismatchedDryRun = "print how many fail-mismatched would fail (would fail: n), and change nothing: the pin's mismatched deliveries, " +
	"as contracts list counts them, leased ones included, which the run leaves to settle (stderr says when the endpoint has a command leased); " +
	"a command enqueued, claimed or finished in between makes the run differ"

// wouldFailMismatched counts what Contracts.FailMismatched of url would
// fail, and fails none: the pin's Mismatched, which counts the leased
// ones FailMismatched leaves in flight too, their digest being in a
// payload the tool may not open. When the endpoint has a leased command,
// stderr says so.
func wouldFailMismatched(ctx context.Context, s *store.Store, url string, stderr io.Writer) (int, error) {
	k, err := s.Contracts.Get(ctx, url)
	switch {
	case errors.Is(err, courier.CodeNotFound): // no pin: nothing is mismatched
		return 0, nil
	case err != nil || k.Mismatched == 0:
		return 0, err
	}
	leased := 0
	err = opsjson.EachDelivery(ctx, s, store.ListParams{Endpoint: url, Status: courier.StatusLeased}, func(d store.Delivery) error {
		if d.Profile == ack.ProfileCommand {
			leased++
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	if leased > 0 {
		fmt.Fprintf(stderr, "courier contracts fail-mismatched: %d of %s's commands are leased: one counted here is left to settle by the run, which fails fewer\n",
			leased, endpointText(k.Endpoint))
	}
	return k.Mismatched, nil
}

// contractsPin pins url's capabilities digest. A pin of a URL the
// database does not know (a typo in its path) is made all the same, as a
// limit is (a pin ahead of an endpoint's commands is allowed), and says
// so on stderr, asked before the pin makes it known: the endpoint meant
// is left unpinned, and the typo becomes an endpoint the other commands
// take for known.
func contractsPin(ctx context.Context, s *store.Store, url, digest string, stdout, stderr io.Writer) error {
	kept, known, err := opsjson.KnownEndpoint(ctx, s, url)
	if err != nil {
		return err
	}
	if err := s.Contracts.Pin(ctx, url, digest); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "pinned: %s %s\n", endpointText(endpoint.Normalize(url)), digest) // as the store keeps a pin
	if !known {
		fmt.Fprintf(stderr, "courier contracts pin: %s: pinned ahead of its commands; check the URL (courier contracts unpin undoes it)\n", unknownEndpoint(kept))
	}
	return nil
}

// contractsUnpin removes url's pin (store.Contracts.Unpin) and says which
// digest it held, so that the pin can be made again. An endpoint with no
// pin is a failure, as an enable of one the database does not know is,
// and so is a pin that holds commands back, which stays.
func contractsUnpin(ctx context.Context, s *store.Store, url string, stdout io.Writer) error {
	k, err := s.Contracts.Get(ctx, url)
	if err == nil {
		err = s.Contracts.Unpin(ctx, url)
	}
	switch {
	case errors.Is(err, courier.CodeNotFound):
		return fmt.Errorf("no contract pin for %s: nothing to unpin", endpointText(endpoint.Normalize(url)))
	case err != nil:
		return err
	}
	fmt.Fprintf(stdout, "unpinned: %s %s\n", endpointText(k.Endpoint), k.CapabilitiesSHA256)
	return nil
}

// resolve takes an endpoint named by its ref, or by its URL as it is;
// anything else is a usage failure saying what the commands take.
func resolve(ctx context.Context, s *store.Store, urlOrRef string) (string, error) {
	switch {
	case endpoint.IsRef(urlOrRef):
		return resolveRef(ctx, s, urlOrRef)
	case !endpoint.Valid(urlOrRef):
		return "", usageFailure("give an endpoint's URL (absolute http or https, with a host, at most 2048 bytes) or its ref, as courier endpoints list shows them")
	}
	return urlOrRef, nil
}

// resolveRef returns the URL of the endpoint whose ref is ref, and says
// which ref named none (the store's not_found does not).
func resolveRef(ctx context.Context, s *store.Store, ref string) (string, error) {
	url, err := s.Endpoints.Resolve(ctx, ref)
	if errors.Is(err, courier.CodeNotFound) {
		return "", fmt.Errorf("no endpoint the database knows has ref %s", ref)
	}
	return url, err
}

// statusNames lists the delivery statuses, for a usage message.
func statusNames() string {
	names := make([]string, 0, len(courier.Statuses()))
	for _, st := range courier.Statuses() {
		names = append(names, string(st))
	}
	return strings.Join(names, ", ")
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// pruneSchedule ends prune's help: how often to run it.
const pruneSchedule = `
Run it every hour or so, from cron (17 * * * * courier prune -db …), on one
host or several: it deletes in short batches, each a transaction of its own, so
it never holds the database for long, and a run that finds little is quick. The
defaults keep a week, past the senders' 72h of retries and their last hour.
`

// pruneDryRun says what prune -dry-run counts, and how the prune after it
// may differ.
const pruneDryRun = "print how many rows each of the four prunes would delete (would prune outbox: n, and so on), and change nothing: " +
	"the rows each prune takes, read and counted, at most -max-rows each (stderr says when more are past their age); " +
	"a delivery finished, a record aged past its retention or one written in between makes the prune differ"

// pruneCmd deletes what a database no longer needs, each table in short
// batches: finished deliveries, the breaker records of endpoints with
// nothing left to send (their breaker's, not an operator's Disable), and
// the attempts log past -older-than, inbox records past
// -inbox-older-than, expired replay pairs and their counts. It is safe to
// run while workers and receivers run, and from cron. What waits for an
// operator stays (see package store, Retention). With -dry-run it counts
// what each prune would delete, and deletes nothing.
func pruneCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flags("prune", stderr, "-db … [flags]")
	db := dbFlag(fs)
	olderThan := fs.Duration("older-than", 7*24*time.Hour, "delete succeeded and suppressed deliveries, the breaker records of endpoints with nothing left to send (failing, open, or disabled by their breaker: a 410 Gone, or failing for -disable-after) (outbox), and attempts, last updated longer ago than this. Kept: failed and quarantined deliveries and the ordering keys they block until cancelled or redriven, endpoints an operator disabled until enabled, limits until cleared (endpoints limit -clear), and contract pins")
	disableAfter := fs.Duration("disable-after", 72*time.Hour, // store.BreakerConfig's default
		"the workers' breaker DisableAfter (store.Config.Breaker): a disabled endpoint that had been failing this long when it was disabled was disabled by its breaker, and its record goes; one an operator disabled sooner stays until enabled")
	inboxOlderThan := fs.Duration("inbox-older-than", 7*24*time.Hour,
		"delete inbox records older than this, of every receiver and sender, at least 24h (a signed request replayed within its tolerance is refused by its record alone); keep them longer than senders retry and an hour more, and than a failed delivery may be redriven after (a redelivery after its record is gone is processed again)")
	maxRows := fs.Int("max-rows", 0, "stop each of the four prunes (each line of the output) after this many rows (0: until all are gone)")
	dryRun := fs.Bool("dry-run", false, pruneDryRun)
	printFlags := fs.Usage
	fs.Usage = func() {
		printFlags()
		fmt.Fprint(stderr, pruneSchedule)
	}
	if err := parseFlags(fs, args, stderr); err != nil {
		return err
	}
	switch {
	case *olderThan <= 0 || *inboxOlderThan <= 0:
		return usageError(stderr, "courier prune: -older-than and -inbox-older-than must be positive")
	case *olderThan < time.Microsecond: // Outbox.Prune's floor, as the store keeps times
		return usageError(stderr, "courier prune: -older-than must be at least 1µs")
	case *inboxOlderThan < 24*time.Hour: // Inbox.Prune's floor, refused before any table is pruned
		return usageError(stderr, "courier prune: -inbox-older-than must be at least 24h")
	case *maxRows < 0:
		return usageError(stderr, "courier prune: -max-rows must not be negative")
	case *disableAfter < time.Millisecond: // the breaker's floor (Config.Breaker)
		return usageError(stderr, "courier prune: -disable-after must be at least 1ms")
	}
	s, done, err := openStore(ctx, *db, store.Config{Breaker: store.BreakerConfig{DisableAfter: *disableAfter}})
	if err != nil {
		return err
	}
	defer done()
	finished := store.PruneParams{OlderThan: *olderThan, MaxRows: *maxRows}
	counts := pruning.For(s)
	for _, t := range []struct {
		name  string
		prune func(context.Context, store.PruneParams) (int, error)
		count pruning.Count
		p     store.PruneParams
	}{
		{"outbox", s.Outbox.Prune, counts.Outbox, finished}, // deliveries and breaker records
		{"attempts", s.Outbox.PruneAttempts, counts.Attempts, finished},
		{"inbox", s.Inbox.Prune, counts.Inbox, store.PruneParams{OlderThan: *inboxOlderThan, MaxRows: *maxRows}},
		{"replay", s.Replay.Prune, counts.Replay, store.PruneParams{MaxRows: *maxRows}},
	} {
		if *dryRun {
			n, err := t.count(ctx, t.p.OlderThan)
			if err != nil {
				return fmt.Errorf("counting %s: %w", t.name, err)
			}
			if *maxRows > 0 && n > *maxRows {
				fmt.Fprintf(stderr, "courier prune: %d rows of %s are past their age: -max-rows stops the prune at %d\n", n, t.name, *maxRows)
				n = *maxRows
			}
			fmt.Fprintf(stdout, "would prune %s: %d\n", t.name, n)
			continue
		}
		n, err := t.prune(ctx, t.p)
		if err != nil {
			return fmt.Errorf("pruning %s after %d rows: %w", t.name, n, err)
		}
		fmt.Fprintf(stdout, "%s: %d\n", t.name, n)
	}
	return nil
}
