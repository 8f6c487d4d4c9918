package main

import (
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/internal/endpoint"
)

// TestEachCommandsHelpSaysHowToCallIt: -h after a command, or after an
// action, prints its synopsis, the arguments it takes after its flags
// among it, then its flags, on stderr, exiting 0. The actions that take
// an argument printed their flags alone under "Usage of courier
// deliveries show:", so that their help never said they take a delivery
// id (nor an endpoint's URL or ref, nor a digest), which only their
// error and the command's usage did.
func TestEachCommandsHelpSaysHowToCallIt(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args     []string
		synopsis string // the help's first line
		flag     string // one of its flags
	}{
		{[]string{"deliveries", "show"}, "usage: courier deliveries show -db … <id>", "-db"},
		{[]string{"deliveries", "cancel"}, "usage: courier deliveries cancel -db … <id>", "-endpoint-ref"},
		{[]string{"deliveries", "redrive"}, "usage: courier deliveries redrive -db … [flags] <id>", "-max-attempts"},
		{[]string{"deliveries", "list"}, "usage: courier deliveries list -db … [flags]", "-status"},
		{[]string{"endpoints", "enable"}, "usage: courier endpoints enable -db … <url-or-ref>", "-db"},
		{[]string{"endpoints", "disable"}, "usage: courier endpoints disable -db … <url-or-ref>", "-db"},
		{[]string{"endpoints", "limit"}, "usage: courier endpoints limit -db … -max-in-flight <n> -rate <per-second> [-burst <n>] <url-or-ref>", "-clear"},
		{[]string{"endpoints", "list"}, "usage: courier endpoints list -db …", "-db"},
		{[]string{"contracts", "pin"}, "usage: courier contracts pin -db … <url-or-ref> <capabilities-sha256>", "-db"},
		{[]string{"contracts", "unpin"}, "usage: courier contracts unpin -db … <url-or-ref>", "-db"},
		{[]string{"contracts", "fail-mismatched"}, "usage: courier contracts fail-mismatched -db … <url-or-ref>", "-db"},
		{[]string{"secret", "new"}, "usage: courier secret new [-type whsec|whsk]", "-type"},
		{[]string{"migrate"}, "usage: courier migrate -db …", "-print"},
		{[]string{"health"}, "usage: courier health -db …", "-db"},
		{[]string{"keys"}, "usage: courier keys -db …", "-db"},
		{[]string{"prune"}, "usage: courier prune -db … [flags]", "-older-than"},
		{[]string{"send"}, "usage: courier send -url <url> [flags]", "-secret-file"},
		{[]string{"verify"}, "usage: courier verify -request <file> [flags]", "-tolerance"},
	} {
		for _, help := range []string{"-h", "--help"} {
			args := append(tc.args[:len(tc.args):len(tc.args)], help)
			t.Run(strings.Join(args, " "), func(t *testing.T) {
				t.Parallel()
				code, out, errOut := courierRun(t, args...)
				first, _, _ := strings.Cut(errOut, "\n")
				if code != exitOK || out != "" || first != tc.synopsis || !strings.Contains(errOut, "\n  "+tc.flag) {
					t.Errorf("courier %s: exit %d, stdout %q, help:\n%s\nwant exit 0 and the help on stderr, its first line %q, then the flags (%s)",
						strings.Join(args, " "), code, out, errOut, tc.synopsis, tc.flag)
				}
			})
		}
	}
}

// TestDeliveriesListHelpNamesTheStatuses: list's -status help said "only
// deliveries in this status" and named none, so that a first -status was
// a guess the usage error corrected.
func TestDeliveriesListHelpNamesTheStatuses(t *testing.T) {
	t.Parallel()
	_, _, errOut := courierRun(t, "deliveries", "list", "-h")
	for _, st := range courier.Statuses() {
		if !strings.Contains(errOut, string(st)) {
			t.Errorf("courier deliveries list -h does not name the status %s:\n%s", st, errOut)
		}
	}
}

// TestContractsSaysWhichArgumentsItTakes: contracts given too few or too
// many arguments said "want 1 arguments", naming none of them. It says
// which it takes, a usage error that opens no database.
func TestContractsSaysWhichArgumentsItTakes(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "app.db") // not there: the arguments are refused first
	for _, tc := range []struct {
		args []string
		says string
	}{
		{[]string{"contracts", "fail-mismatched", "-db", db}, "give the endpoint's URL or ref"},
		{[]string{"contracts", "fail-mismatched", "-db", db, "https://r.example/hooks", "x"}, "give the endpoint's URL or ref"},
		{[]string{"contracts", "pin", "-db", db, "https://r.example/hooks"}, "give the endpoint's URL or ref, then its capabilities digest"},
		{[]string{"contracts", "unpin", "-db", db}, "give the endpoint's URL or ref"},
		{[]string{"contracts", "unpin", "-db", db, "https://r.example/hooks", "x"}, "give the endpoint's URL or ref"},
	} {
		code, out, errOut := courierRun(t, tc.args...)
		if code != exitUsage || out != "" || !strings.Contains(errOut, tc.says) {
			t.Errorf("courier %s: exit %d, stdout %q, stderr %q; want %d saying %q", strings.Join(tc.args, " "), code, out, errOut, exitUsage, tc.says)
		}
	}
}

// TestHelpACommandIsItsHelp: courier help <command> printed the list of
// commands, whatever the command, so that courier help deliveries never
// named deliveries' actions. It prints what -h after the command prints
// (a noun's, every action's synopsis and flags; help deliveries list,
// list's), exiting 0; help for a command there is not is a usage error.
func TestHelpACommandIsItsHelp(t *testing.T) {
	t.Parallel()
	names := [][]string{{"deliveries", "list"}, {"endpoints", "limit"}}
	for _, name := range slices.Sorted(maps.Keys(commands)) {
		names = append(names, []string{name})
	}
	for _, name := range names {
		t.Run(strings.Join(name, " "), func(t *testing.T) {
			t.Parallel()
			_, _, want := courierRun(t, append(name[:len(name):len(name)], "-h")...)
			code, out, errOut := courierRun(t, append([]string{"help"}, name...)...)
			if code != exitOK || out != "" || errOut != want {
				t.Errorf("courier help %s: exit %d, stdout %q, stderr:\n%s\nwant exit 0 and what -h prints:\n%s", strings.Join(name, " "), code, out, errOut, want)
			}
		})
	}
	// help on help, or asked for its -h, is the list of commands.
	_, _, usage := courierRun(t, "-h")
	for _, args := range [][]string{{"help", "help"}, {"help", "-h"}, {"help", "--help"}} {
		if code, out, errOut := courierRun(t, args...); code != exitOK || out != "" || errOut != usage {
			t.Errorf("courier %s: exit %d, stdout %q, stderr:\n%s\nwant exit 0 and the list of commands", strings.Join(args, " "), code, out, errOut)
		}
	}
	code, _, errOut := courierRun(t, "help", "nope")
	if code != exitUsage || !strings.Contains(errOut, `unknown command "nope"`) {
		t.Errorf("courier help nope: exit %d, stderr %q; want %d, unknown command", code, errOut, exitUsage)
	}
}

// TestPruneHelpSaysHowOftenToRunIt: prune's help listed its flags and
// said nothing of when to run it. It says: every hour or so, from cron,
// as the README's Retention says for Prune and courier prune alike.
func TestPruneHelpSaysHowOftenToRunIt(t *testing.T) {
	t.Parallel()
	_, _, help := courierRun(t, "prune", "-h")
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, says := range []string{"every hour or so", "cron"} {
		if !strings.Contains(help, says) {
			t.Errorf("courier prune -h does not say %q:\n%s", says, help)
		}
	}
	if !strings.Contains(string(readme), "**Retention.** Every hour or so") {
		t.Errorf("the README's Retention no longer says every hour or so: say in courier prune -h what it says")
	}
}

// TestHealthHelpSaysItCountsTheEndpoints: courier -h said health shows
// "the endpoints whose breaker is not closed", where it counts them by
// state and names none (endpoints list names them). The help says what
// health prints: how many, and where to find which.
func TestHealthHelpSaysItCountsTheEndpoints(t *testing.T) {
	t.Parallel()
	_, _, usage := courierRun(t, "-h")
	_, entry, _ := strings.Cut(usage, "\n  health ")
	entry, _, _ = strings.Cut(entry, "\n  deliveries ")
	entry = strings.Join(strings.Fields(entry), " ")
	for _, says := range []string{"how many endpoints", "endpoints list names them"} {
		if !strings.Contains(entry, says) {
			t.Errorf("courier -h on health: %q; want it to say %q", entry, says)
		}
	}
	db, s := migrated(t)
	const hook = "https://r.example/hooks"
	enqueue(t, s, "n-1", hook)
	mustRun(t, exitOK, "endpoints", "disable", "-db", db, hook)
	code, out, _ := courierRun(t, "health", "-db", db)
	if code != exitBlocked || !strings.Contains(out, "endpoints disabled: 1\n") || strings.Contains(out, endpoint.Ref(hook)) || strings.Contains(out, "r.example") {
		t.Errorf("health: exit %d, %q; want the disabled endpoint counted, not named", code, out)
	}
	if out := mustRun(t, exitOK, "endpoints", "list", "-db", db); !strings.Contains(out, endpoint.Ref(hook)) {
		t.Errorf("endpoints list: %q; want the disabled endpoint named by its ref", out)
	}
}

// TestRedriveHelpSaysWhatARedriveRisks: a redrive sends a delivery again
// under its notification id however long after it failed, and a receiver
// that processed it and has pruned its inbox record since runs it again.
// The store's docs said so; the help an operator reads before a redrive
// did not.
func TestRedriveHelpSaysWhatARedriveRisks(t *testing.T) {
	t.Parallel()
	_, _, help := courierRun(t, "deliveries", "redrive", "-h")
	for _, says := range []string{"inbox retention", "runs it again", "ack_invalid"} {
		if !strings.Contains(help, says) {
			t.Errorf("courier deliveries redrive -h does not say %q:\n%s", says, help)
		}
	}
}
