package main

import (
	"strings"
	"testing"

	"github.com/courier-go/courier/internal/endpoint"
	"github.com/courier-go/courier/store"
)

// TestEndpointsActionsNameTheEndpointTheyActedOn: enable, disable, limit
// and pin said "enabled: https://hooks.chat.example/…", the redacted URL
// alone, which two webhooks of one service share: an enable of a URL with
// a typo in its path answered just as the enable of the disabled one did,
// exit 0, and that one stayed disabled. Each names the endpoint by its ref
// too, as list does, and enable and disable say when there was nothing
// to change. An enable of a URL the database does not know (the typo)
// then said "already enabled", exit 0, as if all were well: it fails,
// exit 1, saying no endpoint the database knows is that one, as for a
// ref that names none.
func TestEndpointsActionsNameTheEndpointTheyActedOn(t *testing.T) {
	t.Parallel()
	db, s := migrated(t)
	ctx := t.Context()
	const (
		hook  = "https://hooks.chat.example/services/T1/AAAA"
		other = "https://hooks.chat.example/services/T1/BBBB"
		typo  = "https://hooks.chat.example/services/T1/AAAB"
	)
	enqueue(t, s, "n-1", hook)
	enqueue(t, s, "n-2", other)
	state := func(url string) store.EndpointState {
		t.Helper()
		h, err := s.Endpoints.Get(ctx, url)
		if err != nil {
			t.Fatal(err)
		}
		return h.State
	}
	for _, step := range []struct {
		args []string
		want string
	}{
		{[]string{"disable", hook}, "disabled: https://hooks.chat.example/… (ref " + endpoint.Ref(hook) + ")\n"},
		{[]string{"disable", endpoint.Ref(hook)}, "already disabled: https://hooks.chat.example/… (ref " + endpoint.Ref(hook) + ")\n"},
		{[]string{"enable", other}, "already enabled: https://hooks.chat.example/… (ref " + endpoint.Ref(other) + "): it was not disabled or paused\n"},
		{[]string{"limit", "-max-in-flight", "2", "-rate", "0", other}, "limits of https://hooks.chat.example/… (ref " + endpoint.Ref(other) + "): max 2 in flight\n"},
	} {
		args := append([]string{"endpoints", step.args[0], "-db", db}, step.args[1:]...)
		if out := mustRun(t, exitOK, args...); out != step.want {
			t.Errorf("courier %s: %q, want %q", strings.Join(args, " "), out, step.want)
		}
	}
	code, out, errOut := courierRun(t, "endpoints", "enable", "-db", db, typo)
	if want := "no endpoint the database knows is https://hooks.chat.example/… (ref " + endpoint.Ref(typo) + ")"; code != exitFailed || out != "" || !strings.Contains(errOut, want) {
		t.Errorf("courier endpoints enable %s: exit %d, stdout %q, stderr %q; want %d saying %q", typo, code, out, errOut, exitFailed, want)
	}
	if st := state(hook); st != store.EndpointDisabled {
		t.Fatalf("%s after an enable of another URL: %s, want disabled still", hook, st)
	}
	if out, want := mustRun(t, exitOK, "endpoints", "enable", "-db", db, hook), "enabled: https://hooks.chat.example/… (ref "+endpoint.Ref(hook)+"), which was disabled\n"; out != want {
		t.Errorf("enable: %q, want %q", out, want)
	}
	if st := state(hook); st != store.EndpointClosed {
		t.Fatalf("%s after its enable: %s, want closed", hook, st)
	}
	digest := strings.Repeat("a", 64)
	if out, want := mustRun(t, exitOK, "contracts", "pin", "-db", db, other, digest), "pinned: https://hooks.chat.example/… (ref "+endpoint.Ref(other)+") "+digest+"\n"; out != want {
		t.Errorf("pin: %q, want %q", out, want)
	}
}

// TestAnEndpointRefNoEndpointHasIsSaid: a ref that names no endpoint the
// store knows (mistyped, or from another database) failed with
// "not_found: not found", which did not say what was not found. It says
// that no endpoint has that ref, exit 1, in every command that takes one.
func TestAnEndpointRefNoEndpointHasIsSaid(t *testing.T) {
	t.Parallel()
	db, s := migrated(t)
	enqueue(t, s, "n-1", "https://r.example/hooks")
	ref := endpoint.Ref("https://r.example/other")
	for _, args := range [][]string{
		{"deliveries", "list", "-db", db, "-endpoint-ref", ref},
		{"deliveries", "redrive", "-db", db, "-endpoint-ref", ref},
		{"endpoints", "enable", "-db", db, ref},
		{"endpoints", "disable", "-db", db, ref},
		{"endpoints", "limit", "-db", db, "-clear", ref},
		{"contracts", "fail-mismatched", "-db", db, ref},
	} {
		code, out, errOut := courierRun(t, args...)
		if want := "no endpoint the database knows has ref " + ref; code != exitFailed || out != "" || !strings.Contains(errOut, want) {
			t.Errorf("courier %s: exit %d, stdout %q, stderr %q; want %d saying %q", strings.Join(args, " "), code, out, errOut, exitFailed, want)
		}
	}
}

// TestAnEndpointArgumentThatIsNoURLIsSaid: an argument that is neither an
// endpoint's URL nor a ref was refused with the store's words for the call
// the command made first ("store: Get endpoint must be …"), which named
// no command of the CLI's. It says what the commands take, exit 2, and
// changes nothing.
func TestAnEndpointArgumentThatIsNoURLIsSaid(t *testing.T) {
	db, _ := migrated(t)
	for _, args := range [][]string{
		{"endpoints", "disable", "-db", db, "ftp://hooks.example/a"},
		{"endpoints", "enable", "-db", db, "hooks.example/a"},
		{"endpoints", "limit", "-db", db, "-max-in-flight", "2", "-rate", "0", "https://"},
		{"contracts", "fail-mismatched", "-db", db, "not a url"},
	} {
		code, _, errOut := courierRun(t, args...)
		if code != exitUsage || !strings.Contains(errOut, "an endpoint's URL") || strings.Contains(errOut, "Get") {
			t.Errorf("courier %s: exit %d, %q; want exit %d saying what an endpoint argument is", strings.Join(args, " "), code, errOut, exitUsage)
		}
	}
}

// TestDisableOfAnEndpointTheDatabaseDoesNotKnowSaysSo: disable of a URL
// with a typo in its path printed "disabled: …", exit 0, as for the
// endpoint meant, which went on being sent to, while the record of the
// misspelt one stays until enabled. A disable ahead of an endpoint's
// deliveries is allowed (store.Endpoints.Disable), so it still disables,
// but says on stderr that the database knew no such endpoint.
func TestDisableOfAnEndpointTheDatabaseDoesNotKnowSaysSo(t *testing.T) {
	t.Parallel()
	db, s := migrated(t)
	enqueue(t, s, "n-1", "https://r.example/hooks")
	code, out, errOut := courierRun(t, "endpoints", "disable", "-db", db, "https://r.example/hook")
	if code != exitOK || !strings.Contains(out, "disabled:") || !strings.Contains(errOut, "no endpoint the database knows") {
		t.Errorf("disable of a URL no delivery has: exit %d, %q, stderr %q; want it disabled, and stderr saying the database knew no such endpoint", code, out, errOut)
	}
	if code, out, errOut := courierRun(t, "endpoints", "disable", "-db", db, "https://r.example/hooks"); code != exitOK || errOut != "" {
		t.Errorf("disable of a known endpoint: exit %d, %q, stderr %q; want nothing on stderr", code, out, errOut)
	}
}

// TestLimitOfAnEndpointTheDatabaseDoesNotKnowSaysSo: limit of a URL with
// a typo in its path printed the limits and exited 0, as for the
// endpoint meant, whose deliveries went on unlimited; limit -clear of
// one printed "limits of …: -" and exited 0, having cleared nothing. A
// limit ahead of an endpoint's deliveries is allowed, so limit still
// sets it and says on stderr that the database knew no such endpoint;
// -clear, with nothing to clear, fails as enable does.
func TestLimitOfAnEndpointTheDatabaseDoesNotKnowSaysSo(t *testing.T) {
	t.Parallel()
	db, s := migrated(t)
	enqueue(t, s, "n-1", "https://r.example/hooks")
	code, out, errOut := courierRun(t, "endpoints", "limit", "-db", db, "-max-in-flight", "2", "-rate", "0", "https://r.example/hook")
	if code != exitOK || !strings.Contains(out, "limits of") || !strings.Contains(errOut, "no endpoint the database knows") {
		t.Errorf("limit of a URL no delivery has: exit %d, %q, stderr %q; want it set, and stderr saying the database knew no such endpoint", code, out, errOut)
	}
	code, out, errOut = courierRun(t, "endpoints", "limit", "-db", db, "-clear", "https://r.example/other")
	if code != exitFailed || out != "" || !strings.Contains(errOut, "no endpoint the database knows") {
		t.Errorf("limit -clear of a URL no delivery has: exit %d, %q, stderr %q; want %d saying the database knew no such endpoint", code, out, errOut, exitFailed)
	}
	for _, args := range [][]string{{"-max-in-flight", "2", "-rate", "0"}, {"-clear"}} {
		args = append(append([]string{"endpoints", "limit", "-db", db}, args...), "https://r.example/hooks")
		if code, out, errOut := courierRun(t, args...); code != exitOK || errOut != "" {
			t.Errorf("courier %v of a known endpoint: exit %d, %q, stderr %q; want nothing on stderr", args, code, out, errOut)
		}
	}
}
