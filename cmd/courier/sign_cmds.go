package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/ack"
	"github.com/courier-go/courier/client"
	"github.com/courier-go/courier/internal/endpoint"
	"github.com/courier-go/courier/internal/serve"
	"github.com/courier-go/courier/internal/strictjson"
	"github.com/courier-go/courier/internal/wire"
	"github.com/courier-go/courier/signature"
)

// secretCmd makes a fresh Standard Webhooks secret (whsec_) or Ed25519
// key pair (whsk_/whpk_).
func secretCmd(_ context.Context, args []string, stdout, stderr io.Writer) error {
	const usage = "usage: courier secret new [-type whsec|whsk]"
	flagSet := func() (*flag.FlagSet, *string) {
		fs := flags("secret new", stderr, "[-type whsec|whsk]")
		return fs, fs.String("type", "whsec", "whsec: an HMAC secret both ends share (v1); whsk: an Ed25519 pair, the private key for the sender, the public one for receivers (v1a)")
	}
	switch {
	case len(args) > 0 && isHelp(args[0]):
		return actionsHelp(stderr, usage, []string{"new"}, func(string) *flag.FlagSet {
			fs, _ := flagSet()
			return fs
		})
	case len(args) == 0 || args[0] != "new":
		return usageError(stderr, usage)
	}
	fs, typ := flagSet()
	if err := parseFlags(fs, args[1:], stderr); err != nil {
		return err
	}
	switch *typ {
	case "whsec":
		fmt.Fprintln(stdout, signature.NewStandardWebhooksSecret())
	case "whsk":
		private, public := signature.NewStandardWebhooksKeyPair()
		fmt.Fprintf(stdout, "private: %s\npublic:  %s\n", private, public)
	default:
		return usageError(stderr, "courier secret new: -type is whsec or whsk")
	}
	return nil
}

// secret reads the Standard Webhooks key from a file, or from
// $COURIER_SECRET (see serve.Secret: the examples read theirs so). None
// given is a usage error.
func secret(file string) (signature.StandardWebhooksKey, error) {
	encoded, err := serve.Secret(file)
	if errors.Is(err, serve.ErrNoSecret) {
		return signature.StandardWebhooksKey{}, usageFailure(err.Error())
	}
	if err != nil {
		return signature.StandardWebhooksKey{}, err
	}
	return signature.ParseStandardWebhooksKey("", encoded)
}

// sendCmd signs and POSTs one test notification with Standard Webhooks,
// as a worker would, and checks the answer. A notification the receiver
// does not accept with a 2xx and, for a profile that has one, a valid
// Ack is a failure, exit 1: the worker would not count it delivered.
func sendCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flags("send", stderr, "-url <url> [flags]")
	target := fs.String("url", "", "the receiver's endpoint (required)")
	id := fs.String("id", "", "the notification id, a token of A-Z a-z 0-9 _ . : - (default: a fresh test-… id)")
	body := fs.String("body", "", `the JSON payload (default: {"id":"<id>","test":true})`)
	secretFile := fs.String("secret-file", "", "file holding the whsec_ secret or whsk_ key (default: $COURIER_SECRET)")
	profile := fs.String("profile", ack.ProfileCourier, "the Ack the receiver must answer with: courier, terminal, none, reporting or command")
	allowPrivate := fs.Bool("allow-private", false, "allow loopback and private addresses and plain http on the URL's port (the default is https on 443 to public addresses only)")
	caFile := fs.String("cacert", "", "file of PEM certificates: the certificate authorities to trust instead of the system's, for a receiver a private CA vouches for")
	certFile := fs.String("cert", "", "file of the PEM client certificate to present, for a receiver that asks for one (mutual TLS); with -key")
	keyFile := fs.String("key", "", "file of the -cert's PEM private key")
	timeout := fs.Duration("timeout", 15*time.Second, "how long to wait for the answer")
	if err := parseFlags(fs, args, stderr); err != nil {
		return err
	}
	switch {
	case *target == "":
		return usageError(stderr, "courier send: -url is required")
	case *timeout <= 0:
		return usageError(stderr, "courier send: -timeout must be above zero")
	case (*certFile == "") != (*keyFile == ""):
		return usageError(stderr, "courier send: -cert and -key go together")
	case *id != "" && !wire.IsToken(*id):
		return usageError(stderr, "courier send: -id must be %s (a notification id)", wire.TokenRule)
	}
	p, ok := ack.Builtin(*profile)
	if !ok {
		return usageError(stderr, "courier send: unknown profile %q", *profile)
	}
	if *id == "" {
		var b [6]byte
		_, _ = rand.Read(b[:])
		*id = "test-" + hex.EncodeToString(b[:])
	}
	if *body == "" {
		*body = `{"id":"` + *id + `","test":true}`
	}
	if err := strictjson.Check([]byte(*body)); err != nil {
		return usageError(stderr, "courier send: -body is not one JSON document: %v", err)
	}
	key, err := secret(*secretFile)
	if err != nil {
		return err
	}
	signer, err := signature.NewStandardWebhooksSigner(key)
	if err != nil {
		return err
	}
	u, err := url.Parse(*target)
	if err != nil {
		// Not even the parser's reason: it quotes a piece of the URL (as
		// the port, what follows a password's unescaped / or ?), which
		// may be a credential.
		return usageError(stderr, "courier send: -url is not a URL (not shown: it may hold a credential)")
	}
	if !endpoint.Valid(*target) {
		// A relative URL, or another scheme, would be refused by the
		// guard as destination_forbidden, whose hint (-allow-private)
		// opens no such URL.
		return usageError(stderr, "courier send: -url must be %s (not shown: it may hold a credential)", endpoint.Rule)
	}
	if !endpoint.Dialable(*target) {
		// As the outbox refuses a new endpoint on port 0 or above 65535:
		// the guard would refuse it as destination_forbidden, and no flag
		// opens such a port.
		return usageError(stderr, "courier send: -url must be %s (not shown: it may hold a credential)", endpoint.PortRule)
	}
	if !endpoint.HostAsDialed(*target) {
		// As the outbox refuses a new endpoint whose host is another
		// spelling of the name dialed (not ASCII, or rooted with a
		// trailing dot): send would reach a receiver by a name no
		// enqueue of it could use.
		return usageError(stderr, "courier send: -url must be %s (not shown: it may hold a credential)", endpoint.HostRule)
	}
	guard := client.Guard{}
	if *allowPrivate {
		port, _ := strconv.ParseUint(u.Port(), 10, 16)
		guard = client.Guard{AllowHTTP: true, AllowPorts: []uint16{80, 443, uint16(port)}, AllowPrefixes: []netip.Prefix{
			netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128"), netip.MustParsePrefix("10.0.0.0/8"),
			netip.MustParsePrefix("172.16.0.0/12"), netip.MustParsePrefix("192.168.0.0/16"), netip.MustParsePrefix("fc00::/7"),
		}}
	}
	if guard.TLSClientConfig, err = sendTLS(*caFile, *certFile, *keyFile); err != nil {
		return usageError(stderr, "courier send: %v", err)
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, *target, strings.NewReader(*body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", wire.UserAgent)
	req.Header.Set(ack.AttemptHeader, "1") // as the worker's first attempt: a Source requires it
	if err := signer.Sign(req, signature.Message{ID: *id, Body: []byte(*body), Time: time.Now()}); err != nil {
		return err
	}
	resp, err := (&http.Client{Transport: guard.Transport(), CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}).Do(req)
	if err != nil {
		// The client's *url.Error quotes the URL whole, credentials and all.
		var urlErr *url.Error
		if errors.As(err, &urlErr) {
			err = urlErr.Err
		}
		if errors.Is(err, courier.CodeDestinationForbidden) && !*allowPrivate {
			return fmt.Errorf("POST %s: %w (-allow-private opens loopback and private addresses and plain http, for a receiver in development)", endpoint.Redact(*target), err)
		}
		// A certificate's error quotes the names it holds, the receiver's
		// text, as its answer is.
		return fmt.Errorf("POST %s: %w", endpoint.Redact(*target), inertError{err})
	}
	defer resp.Body.Close()
	answer, _ := io.ReadAll(io.LimitReader(resp.Body, wire.MaxAckSize+1))
	fmt.Fprintf(stdout, "notification: %s\nstatus: %d\n", *id, resp.StatusCode)
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		fmt.Fprintf(stdout, "answer: %s\n", inert(bytes.TrimSpace(answer)))
		if client.DefaultClassify(resp, nil).Retry {
			// Not a refusal: a worker would try again later (a 5xx, 408,
			// 425, 429, as DefaultClassify judges it).
			return fmt.Errorf("the receiver did not take the notification now: status %d (a worker would retry it)", resp.StatusCode)
		}
		return fmt.Errorf("the receiver refused the notification: status %d", resp.StatusCode)
	}
	if p.Verify != nil {
		if err := p.Verify(ack.Sent{ID: *id, Payload: []byte(*body), Attempt: 1}, answer); err != nil {
			fmt.Fprintf(stdout, "ack: invalid (%s)\n", courier.CodeOf(err))
			return fmt.Errorf("the receiver's Ack does not verify: %s", string(courier.CodeOf(err)))
		}
		fmt.Fprintln(stdout, "ack: valid")
	}
	return nil
}

// maxCaptureBody is the largest captured body verify reads, 16 MiB: four
// times a notification's largest payload (store.MaxPayloadSize).
const maxCaptureBody = 16 << 20

// verifyCmd checks a captured HTTP request's Standard Webhooks signature.
func verifyCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flags("verify", stderr, "-request <file> [flags]")
	file := fs.String("request", "", "the captured request, as it came over the wire (method line, headers, body); - for stdin")
	secretFile := fs.String("secret-file", "", "file holding the whsec_ secret or whpk_ key (default: $COURIER_SECRET)")
	sender := fs.String("sender", "sender", "the name the verified sender is reported by")
	tolerance := fs.Duration("tolerance", 5*time.Minute, "how far the signed timestamp may be from -at, 1s to 1h")
	at := fs.String("at", "", "the instant to verify as of, RFC 3339 (default: now); for an old capture, a moment after it was sent")
	if err := parseFlags(fs, args, stderr); err != nil {
		return err
	}
	now := time.Now
	switch {
	case *file == "":
		return usageError(stderr, "courier verify: -request is required")
	case *tolerance < time.Second || *tolerance > time.Hour: // the verifier takes 0 for its default
		return usageError(stderr, "courier verify: -tolerance must be from 1s to 1h")
	case *at != "":
		t, err := time.Parse(time.RFC3339, *at)
		if err != nil {
			return usageError(stderr, "courier verify: -at must be an RFC 3339 time, such as 2026-01-02T15:04:05Z")
		}
		now = func() time.Time { return t }
	}
	var in io.Reader = os.Stdin
	if *file != "-" {
		f, err := os.Open(*file)
		if err != nil {
			return err
		}
		defer f.Close()
		in = f
	}
	req, err := http.ReadRequest(bufio.NewReader(in))
	if err != nil {
		// Not wrapped: its text quotes the line it choked on, which may be
		// a secret (a secret file given as -request, an Authorization line).
		return errors.New("the capture is not an HTTP request")
	}
	body, err := io.ReadAll(io.LimitReader(req.Body, maxCaptureBody+1))
	switch {
	case err != nil:
		// Its text says why (unexpected EOF, a chunk's length), never the
		// bytes.
		return fmt.Errorf("the capture's body is not as its headers frame it (a capture cut short, or edited): %w", err)
	case len(body) > maxCaptureBody:
		// Verified cut short, it would be refused as signature_mismatch.
		return fmt.Errorf("the capture's body is over %d MiB: verify reads none larger", maxCaptureBody>>20)
	}
	key, err := secret(*secretFile)
	if err != nil {
		return err
	}
	v, err := signature.NewStandardWebhooksVerifier(signature.StandardWebhooksVerifierConfig{
		Sender: *sender, Keys: []signature.StandardWebhooksKey{key.Public()}, Tolerance: *tolerance, Now: now,
	})
	if err != nil {
		return err
	}
	principal, err := v.Verify(ctx, req, body)
	if err != nil {
		fmt.Fprintf(stdout, "refused: %s\n", courier.CodeOf(err))
		return errBlocked
	}
	fmt.Fprintf(stdout, "verified: sender %s, key %s, message %s\n", principal.Sender, principal.KeyID, principal.MessageID)
	return nil
}

// sendTLS returns send's TLS for the guard: nil (the system's certificate
// authorities, no client certificate) unless -cacert or -cert is given.
// Its errors name the flag, never what the file holds.
func sendTLS(caFile, certFile, keyFile string) (*tls.Config, error) {
	if caFile == "" && certFile == "" {
		return nil, nil
	}
	c := &tls.Config{}
	if caFile != "" {
		pemCerts, err := os.ReadFile(caFile)
		if err != nil {
			return nil, fmt.Errorf("-cacert: %w", err)
		}
		c.RootCAs = x509.NewCertPool()
		if !c.RootCAs.AppendCertsFromPEM(pemCerts) {
			return nil, errors.New("-cacert holds no PEM certificate")
		}
	}
	if certFile != "" {
		cert, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return nil, fmt.Errorf("-cert and -key: %w", err) // paths and parse failures, never the key
		}
		c.Certificates = []tls.Certificate{cert}
	}
	return c, nil
}

// inertError is an error whose message is shown inert (see inert).
type inertError struct{ err error }

func (e inertError) Error() string { return inert([]byte(e.err.Error())) }
func (e inertError) Unwrap() error { return e.err }

// inert returns what a receiver answered, for a terminal: its control and
// format characters (new lines and tabs aside) and its bytes that are not
// UTF-8 escaped as Go writes them, so that a receiver's answer cannot drive
// the terminal (clear it, set its clipboard, reorder what it shows).
func inert(b []byte) string {
	var sb strings.Builder
	for len(b) > 0 {
		r, n := utf8.DecodeRune(b)
		switch {
		case r == utf8.RuneError && n == 1:
			fmt.Fprintf(&sb, `\x%02x`, b[0])
		case r != '\n' && r != '\t' && unicode.In(r, unicode.Cc, unicode.Cf):
			q := strconv.QuoteRune(r)
			sb.WriteString(q[1 : len(q)-1])
		default:
			sb.Write(b[:n])
		}
		b = b[n:]
	}
	return sb.String()
}
