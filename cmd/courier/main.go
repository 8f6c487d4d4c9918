// Command courier is courier's operator tool: it migrates a database,
// reports the outbox's health, inspects and acts on deliveries, endpoints
// and contract pins, prunes what the tables no longer need, counts the
// rows kept under each payload key, makes signing secrets, and sends or
// verifies a signed test notification.
//
//	courier migrate   -db app.db            (or -print -db … / -print -engine sqlite|postgres: write the SQL)
//	courier health    -db app.db
//	courier deliveries list|show|redrive|cancel -db app.db …
//	courier deliveries cancel -db app.db -endpoint-ref <ref>   (or -endpoint <url>: all it takes of an endpoint gone for good)
//	courier endpoints list|blocked|enable|disable|limit -db app.db …
//	courier contracts list|pin|unpin|fail-mismatched -db app.db …
//	courier prune  -db app.db [-older-than 168h] [-inbox-older-than 168h] [-disable-after 72h] [-dry-run]
//	courier keys   -db app.db
//	courier secret new [-type whsec|whsk]
//	courier send   -url https://receiver.example/hooks [-id n-1] [-body '{…}'] [-allow-private] [-cacert ca.pem] [-cert c.pem -key k.pem]
//	courier verify -request captured.http [-sender name] [-tolerance 5m] [-at time]
//	courier version                     (this courier's release, and the schema version it migrates to)
//	courier help   [command [action]]   (what -h after it prints)
//
// -db is a SQLite file path (not a file: URI, nor a URL of another
// scheme, and without ?parameters: the tool sets the connection's own; in
// a directory that exists, for migrate creates the file, not its
// directory), or a PostgreSQL URL (postgres://…,
// the scheme in any case) or keyword/value string (host=… dbname=…); no
// output quotes it, since it may hold a password, nor a word of the
// command line that may be one out of place. Better, leave the password
// out of -db, which other users of the machine see, for $PGPASSWORD or a
// ~/.pgpass file: pgx reads libpq's environment variables and password
// file. A PostgreSQL server that does not take the connection is given up
// on after 10 seconds (connect_timeout=5, tried twice), unless -db or
// $PGCONNECT_TIMEOUT says otherwise. Signing secrets come from
// $COURIER_SECRET or -secret-file, never from the command line.
//
// On SQLite the tool runs beside the application on its file, a process
// of its own sharing SQLite's one write lock (see package store/sqlite):
// run it as a user who may write the file, its -wal and -shm files and its
// directory, for health and list too. The application's workers claim
// what it redrives or enables at their next poll, not at once.
//
// Exit status: 0 on success; 1 when the command failed, as deliveries
// redrive and cancel do when they leave the delivery id they were given
// as it was (an endpoint with nothing to redrive or cancel is no failure;
// a redrive or an endpoint's cancel that fails part-way prints
// "redriven: n" or "cancelled: n" for those it redrove or cancelled,
// which stay so, before its error), as endpoints enable, deliveries
// redrive and cancel given an endpoint, and contracts fail-mismatched do
// for an endpoint the database does not know (no deliveries, breaker, limits, subscription or
// contract pin: a mistyped URL, or one of another database), as
// contracts unpin does for an endpoint with no pin or a pin that holds
// commands back, and as send does when the receiver refuses the
// notification or answers with an Ack that does not verify; 2 for a usage
// error, a -db that does not parse, a secret not given and the store's
// refusal of an argument (invalid_argument) included; 3 when health is
// blocked or verify refuses the request.
//
// migrate says what it found: the migrations it applied ("migrated:
// schema version 12 (was 9)"), none to apply ("up to date: schema version
// 12"), or the schema of a newer courier, which this one runs on and adds
// nothing to (exit 0; see Upgrades in package store), unless that courier
// recorded that older ones must not run on it: schema_too_new, exit 1.
//
// An interrupt (Ctrl-C) or SIGTERM cancels the command, which exits 1:
// migrate applies all its migrations in one transaction or none, and
// prune and redrive keep the batches they committed, each a short
// transaction of its own, as an endpoint's cancel keeps each delivery it
// cancelled (prune has printed the count of every table it
// finished, and says how far it got in the one it was on). A second
// interrupt or SIGTERM ends the tool at once, with the status a shell
// gives a process its signal ended: 130 for an interrupt, 143 for
// SIGTERM. So does one the tool was started with ignored (a job a
// script put in the background, which ignores the interrupt): the tool
// hears both signals whatever it inherited.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"github.com/courier-go/courier"
)

func main() {
	ctx, cancel := context.WithCancel(context.Background())
	signals := make(chan os.Signal, 1)
	signal.Notify(signals, os.Interrupt, syscall.SIGTERM)
	// The first signal cancels the command; a second ends the process at
	// once: a wait inside SQLite for its write lock does not heed ctx
	// until its busy timeout. It is caught rather than left to the
	// signal's default action, which for a tool started with the
	// interrupt ignored is to ignore it again.
	go func() {
		<-signals
		cancel()
		sig := <-signals
		fmt.Fprintf(os.Stderr, "courier: %s again: ending now\n", sig)
		os.Exit(exitSignaled + int(sig.(syscall.Signal)))
	}()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

// Exit statuses.
const (
	exitOK      = 0
	exitFailed  = 1
	exitUsage   = 2
	exitBlocked = 3

	// exitSignaled plus a signal's number is the status of a tool a
	// second signal ended, as a shell reports a process the signal
	// killed.
	exitSignaled = 128
)

// errUsage is a command line that does not parse; the command has said
// why on stderr.
var errUsage = errors.New("usage")

// errBlocked is a health that is blocked or a request verify refuses:
// the command succeeded and reports a negative answer.
var errBlocked = errors.New("blocked")

// command is one subcommand: it parses its own flags from args.
type command func(ctx context.Context, args []string, stdout, stderr io.Writer) error

var commands = map[string]command{
	"migrate":    migrateCmd,
	"health":     healthCmd,
	"deliveries": deliveriesCmd,
	"endpoints":  endpointsCmd,
	"contracts":  contractsCmd,
	"prune":      pruneCmd,
	"keys":       keysCmd,
	"secret":     secretCmd,
	"send":       sendCmd,
	"verify":     verifyCmd,
	"version":    versionCmd,
}

const usage = `usage: courier <command> [flags]

commands:
  migrate     apply courier's migrations (-print: write their SQL instead, for -db or -engine)
  health      the outbox's health, and how many endpoints' breakers are open,
              half open or disabled (endpoints list names them); exit 3 when
              blocked
  deliveries  list, show, redrive or cancel deliveries, one or an endpoint's
  endpoints   list endpoints (breaker, in flight, limits, blocked keys); the
              blocked keys and the failed delivery holding each; enable,
              disable or limit one
  contracts   list pins (those holding commands back first); pin an endpoint's
              capabilities digest, or unpin it; fail mismatched commands
  prune       delete finished deliveries, dead endpoints' breaker records, old
              attempts, inbox records and replay pairs
  keys        the payload keys stored rows are kept under (a retired key may go
              once it keeps none)
  secret      new: a Standard Webhooks secret or key pair
  send        sign and POST a test notification to a URL (exit 1 when not accepted)
  verify      check a captured HTTP request's signature (exit 3 when refused)
  version     this courier's version and the schema version it migrates to

Run courier <command> -h, or courier help <command>, for a command's flags
(a command's actions and theirs).

exit status: 0 done; 1 failed, or left what it was asked to change as it was
(why, on stderr); 2 a command line that does not parse; 3 a negative answer
(health blocked, verify refused).
`

// run runs the command line args and returns the exit status.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || isHelp(args[0]) || isHelpOnHelp(args) {
		fmt.Fprint(stderr, usage)
		if len(args) == 0 {
			return exitUsage
		}
		return exitOK
	}
	if args[0] == "help" {
		// help deliveries [list] is deliveries [list] -h: a noun's actions
		// and their flags, or a command's.
		args = append(slices.Clone(args[1:]), "-h")
	}
	cmd, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "courier: unknown command %s\n\n%s", quoteArg(args[0]), usage)
		return exitUsage
	}
	switch err := cmd(ctx, args[1:], stdout, stderr); {
	case err == nil:
		return exitOK
	case errors.Is(err, flag.ErrHelp):
		return exitOK
	case errors.Is(err, errUsage):
		var u usageFailure
		if errors.As(err, &u) {
			fmt.Fprintf(stderr, "courier %s: %s\n", args[0], u)
		}
		return exitUsage
	case errors.Is(err, errBlocked):
		return exitBlocked
	case errors.Is(err, courier.CodeInvalidArgument):
		// The store refused an argument of the command line's, as a
		// usage error: the same command would fail again.
		fmt.Fprintf(stderr, "courier %s: %v\n", args[0], err)
		return exitUsage
	default:
		fmt.Fprintf(stderr, "courier %s: %v\n", args[0], err)
		return exitFailed
	}
}

// flags returns a flag set for a command that reports to stderr. Its
// help (-h, or a flag it does not take) says how to call the command,
// each of synopses a way ("usage: courier <name> <synopsis>": the flags
// it needs and the arguments it takes after them), then its flags.
func flags(name string, stderr io.Writer, synopses ...string) *flag.FlagSet {
	fs := flag.NewFlagSet("courier "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		for i, synopsis := range synopses {
			lead := "usage:"
			if i > 0 {
				lead = "      " // under the first
			}
			fmt.Fprintf(stderr, "%s %s %s\n", lead, fs.Name(), synopsis)
		}
		fs.PrintDefaults()
	}
	return fs
}

// parse parses args, mapping a parse failure to errUsage.
func parse(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return errUsage
	}
	return nil
}

// parseFlags parses args for a command that takes flags only: a word
// left over is a usage error, since the flag package stops at it and
// would leave every flag after it unread.
func parseFlags(fs *flag.FlagSet, args []string, stderr io.Writer) error {
	return parseArgs(fs, args, 0, "flags only", stderr)
}

// parseArgs parses args for a command that takes at most n words after
// its flags, which takes describes: a word beyond them is a usage error,
// as a word left over is for parseFlags.
func parseArgs(fs *flag.FlagSet, args []string, n int, takes string, stderr io.Writer) error {
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() > n {
		return usageError(stderr, "%s: unexpected argument %s (it takes %s; the flags after it were not read)", fs.Name(), quoteArg(fs.Arg(n)), takes)
	}
	return nil
}

// quoteArg quotes a word of the command line for a usage message, unless
// it may hold a password: a PostgreSQL connection string, given without
// its -db or as the words of a keyword/value string left unquoted, or a
// URL with credentials.
func quoteArg(arg string) string {
	if isPostgres(arg) || (strings.Contains(arg, "://") && strings.Contains(arg, "@")) {
		return "[not shown: it may hold a password]"
	}
	return strconv.Quote(arg)
}

// isHelpOnHelp reports whether args ask help for the list of commands:
// help alone, help help, or help -h.
func isHelpOnHelp(args []string) bool {
	return args[0] == "help" && (len(args) == 1 || args[1] == "help" || isHelp(args[1]))
}

// isHelp reports whether arg asks for help, as the flag package takes it:
// -h or -help, with one dash or two.
func isHelp(arg string) bool {
	switch arg {
	case "-h", "-help", "--h", "--help":
		return true
	}
	return false
}

// actionsHelp answers -h given in place of the action of a command that
// has actions: the command's usage line, then each action's flags as the
// flag package prints them for -h. It returns flag.ErrHelp, as a parse
// of -h does: the exit status is 0.
func actionsHelp(stderr io.Writer, usage string, actions []string, flagSet func(action string) *flag.FlagSet) error {
	fmt.Fprintln(stderr, usage)
	for _, action := range actions {
		fmt.Fprintln(stderr)
		flagSet(action).Usage()
	}
	return flag.ErrHelp
}

// usageFailure is a usage error found past the flags' parsing, whose
// message main prints: the exit is exitUsage.
type usageFailure string

func (u usageFailure) Error() string        { return string(u) }
func (u usageFailure) Is(target error) bool { return target == errUsage }

// usageError reports a usage mistake on stderr and returns errUsage.
func usageError(stderr io.Writer, format string, a ...any) error {
	fmt.Fprintf(stderr, format+"\n", a...)
	return errUsage
}
