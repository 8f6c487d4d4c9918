package middleware_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/middleware"
	"github.com/courier-go/courier/signature"
)

// Every way a request under Verify or ReadBody can end gives its
// reservation back: InUse is 0 once the handler has returned.
func TestBudgetIsGivenBackHoweverTheRequestEnds(t *testing.T) {
	const maxBytes = 1 << 16
	accept := verifierFunc(func(context.Context, *http.Request, []byte) (signature.Principal, error) {
		return signature.Principal{Sender: "s"}, nil
	})
	reject := verifierFunc(func(context.Context, *http.Request, []byte) (signature.Principal, error) {
		return signature.Principal{}, courier.CodeSignatureInvalid
	})
	broken := verifierFunc(func(context.Context, *http.Request, []byte) (signature.Principal, error) {
		return signature.Principal{}, errors.New("key store down")
	})
	panicky := verifierFunc(func(context.Context, *http.Request, []byte) (signature.Principal, error) {
		panic("verifier")
	})
	nexts := map[string]http.HandlerFunc{
		"returns": func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") },
		"panics":  func(http.ResponseWriter, *http.Request) { panic("boom") },
		"aborts":  func(http.ResponseWriter, *http.Request) { panic(http.ErrAbortHandler) },
		"hijacks": func(w http.ResponseWriter, r *http.Request) {
			if c, _, err := http.NewResponseController(w).Hijack(); err == nil {
				c.Close()
			}
		},
	}
	full := func(n int, chunked bool) func(t *testing.T, c *http.Client, url string) {
		return func(t *testing.T, c *http.Client, url string) {
			req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, url, strings.NewReader(strings.Repeat("x", n)))
			if chunked {
				req.Body = io.NopCloser(req.Body)
				req.ContentLength = -1
			}
			if resp, err := c.Do(req); err == nil {
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		}
	}
	// half sends part of a body, waits until the server has reserved,
	// then gives up on the request (HTTP/2: a stream reset).
	half := func(reserved <-chan struct{}) func(t *testing.T, c *http.Client, url string) {
		return func(t *testing.T, c *http.Client, url string) {
			ctx, cancel := context.WithCancel(t.Context())
			pr, pw := io.Pipe()
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, pr)
			req.ContentLength = 100
			go func() {
				pw.Write([]byte("partial"))
				<-reserved
				cancel()
				pw.CloseWithError(context.Canceled)
			}()
			if resp, err := c.Do(req); err == nil {
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		}
	}
	for _, h2 := range []bool{false, true} {
		for _, chain := range []string{"Verify", "ReadBody"} {
			verifiers := map[string]signature.Verifier{"accepts": accept, "rejects": reject, "fails": broken, "panics": panicky}
			if chain == "ReadBody" {
				verifiers = map[string]signature.Verifier{"": accept}
			}
			for vname, v := range verifiers {
				for nname, next := range nexts {
					if h2 && nname == "hijacks" {
						continue
					}
					name := chain + "/" + vname + "/" + nname
					if h2 {
						name = "h2/" + name
					}
					t.Run(name, func(t *testing.T) {
						budget := middleware.NewBudget(maxBytes)
						l := middleware.BodyLimits{MaxBytes: maxBytes, Budget: budget}
						var h http.Handler
						if chain == "Verify" {
							h = middleware.Verify(v, l)(next)
						} else {
							h = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
								if _, ok := middleware.ReadBody(w, r, l); ok {
									next(w, r)
								}
							})
						}
						done := make(chan struct{}, 1)
						reserved := make(chan struct{})
						watch := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
							defer func() { done <- struct{}{} }()
							if r.ContentLength == 100 { // half: signal once the read is under way
								r.Body = &signalBody{ReadCloser: r.Body, budget: budget, reserved: reserved}
							}
							h.ServeHTTP(w, r)
						})
						srv := serve(t, watch, h2)
						sends := map[string]func(*testing.T, *http.Client, string){
							"small":    full(10, false),
							"chunked":  full(10, true),
							"too long": full(maxBytes+1, true),
							"half":     half(reserved),
						}
						for sname, send := range sends {
							send(t, srv.Client(), srv.URL)
							<-done
							if n := budget.InUse(); n != 0 {
								t.Errorf("%s body: InUse = %d after the handler returned, want 0", sname, n)
							}
						}
					})
				}
			}
		}
	}
}

// signalBody closes reserved at its first read, by when the Budget holds
// the body's reservation.
type signalBody struct {
	io.ReadCloser
	budget   *middleware.Budget
	reserved chan struct{}
	once     bool
}

func (b *signalBody) Read(p []byte) (int, error) {
	if !b.once {
		b.once = true
		if b.budget.InUse() == 0 {
			panic("read before the reservation")
		}
		close(b.reserved)
	}
	return b.ReadCloser.Read(p)
}
