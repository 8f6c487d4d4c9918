// Package serve is what courier's programs (the examples, the crash
// harness's receiver, the trickle measurement) share: an http.Server with
// every timeout and size bound a server on the internet needs, run until
// its context ends, and the signing secret read from the environment or a
// file, never from the command line (where ps shows it).
package serve

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
	"time"
)

// Server returns an http.Server for h with courier's recommended bounds: a
// client must send its headers within 5 s and its whole request within
// 30 s, is answered within 30 s, and an idle keep-alive connection is
// closed after 2 minutes; headers are at most 64 KiB. (courier's receivers
// bound the body themselves as well: size, read deadline and a byte
// budget across requests.)
func Server(h http.Handler) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
	}
}

// Run serves srv on ln until ctx ends, then shuts it down, letting
// requests in flight finish for up to 10 s.
func Run(ctx context.Context, srv *http.Server, ln net.Listener) error {
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	select {
	case err := <-served:
		return err
	case <-ctx.Done():
	}
	shutdown, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdown); err != nil {
		return err
	}
	if err := <-served; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// ErrNoSecret is Secret's error when neither a file nor $COURIER_SECRET
// gives one.
var ErrNoSecret = errors.New("no secret: set COURIER_SECRET or pass -secret-file")

// Secret returns the Standard Webhooks secret (whsec_…) from the file at
// path, without the white space around it (a trailing newline), or from
// $COURIER_SECRET when path is "". A file with nothing else is an error.
func Secret(path string) (string, error) {
	if path == "" {
		if s := os.Getenv("COURIER_SECRET"); s != "" {
			return s, nil
		}
		return "", ErrNoSecret
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("secret file: %w", err)
	}
	secret := strings.TrimSpace(string(b))
	if secret == "" {
		return "", fmt.Errorf("secret file %s is empty", path)
	}
	return secret, nil
}
