//go:build linux

package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"syscall"
	"time"

	"github.com/courier-go/courier/ack"
	"github.com/courier-go/courier/signature"
)

// connResult is how one attacking connection ended.
type connResult struct {
	dialErr error
	lived   time.Duration // from the dial until the server closed it
	open    bool          // still open when the attack ended
	status  int           // the answer's status; 0 if none came
	end     string        // how the server ended it: "close" (EOF) or "reset"
}

// trickleConn declares cfg.length bytes of body, sends cfg.burst of them at
// once and then cfg.rate bytes every cfg.every, until the server closes the
// connection or ctx ends.
func trickleConn(ctx context.Context, addr string, cfg config, burst []byte) connResult {
	head := fmt.Appendf(nil, "POST /terminal HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", addr, cfg.length)
	return attackConn(ctx, addr, func(c net.Conn, closed <-chan struct{}) {
		if _, err := c.Write(head); err != nil {
			return
		}
		if _, err := c.Write(burst); err != nil {
			return
		}
		tick := time.NewTicker(cfg.every)
		defer tick.Stop()
		piece := bytes.Repeat([]byte(" "), cfg.rate)
		for left := cfg.length - cfg.burst; left > 0; left -= int64(len(piece)) {
			select {
			case <-closed:
				return
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			piece = piece[:min(int64(len(piece)), left)]
			if _, err := c.Write(piece); err != nil {
				return // the server hung up; the reader sees it too
			}
		}
	})
}

// idleConn makes one quick request (a GET, answered 405) and then keeps
// the connection open and silent, as a keep-alive client does.
func idleConn(ctx context.Context, addr string) connResult {
	return attackConn(ctx, addr, func(c net.Conn, _ <-chan struct{}) {
		fmt.Fprintf(c, "GET /terminal HTTP/1.1\r\nHost: %s\r\n\r\n", addr)
	})
}

// attackConn dials addr, runs send on the connection and reads whatever
// the server answers until it closes the connection or ctx ends.
func attackConn(ctx context.Context, addr string, send func(c net.Conn, closed <-chan struct{})) connResult {
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return connResult{dialErr: err}
	}
	defer c.Close()
	start := time.Now()
	if end, ok := ctx.Deadline(); ok {
		c.SetDeadline(end) // reads and writes end with the attack
	}
	var res connResult
	closed := make(chan struct{})
	go func() {
		defer close(closed)
		br := bufio.NewReader(c)
		resp, err := http.ReadResponse(br, nil) //nolint:bodyclose // only the status is read; the connection closes
		if err == nil {
			res.status = resp.StatusCode
			_, err = io.Copy(io.Discard, resp.Body)
			if err == nil {
				_, err = io.Copy(io.Discard, br) // nil at EOF: the server closed it
			}
		}
		res.lived = time.Since(start)
		switch {
		case errors.Is(err, os.ErrDeadlineExceeded):
			res.open = true
		case err == nil || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF):
			res.end = "close"
		case errors.Is(err, syscall.ECONNRESET):
			res.end = "reset"
		default:
			res.end = err.Error()
		}
	}()
	send(c, closed)
	<-closed
	return res
}

// warmUp sends n signed terminal notifications, so the baseline is a
// receiver that has served requests.
func warmUp(addr, secret string, n int) error {
	key, err := signature.ParseStandardWebhooksKey("k1", secret)
	if err != nil {
		return err
	}
	signer, err := signature.NewStandardWebhooksSigner(key)
	if err != nil {
		return err
	}
	c := &http.Client{Timeout: 10 * time.Second}
	defer c.CloseIdleConnections()
	for i := range n {
		event := "warmup-" + strconv.Itoa(i)
		lifecycle := ack.Digest([]byte("lifecycle-" + event))
		t, err := ack.NewTerminal(ack.Terminal{
			EventID: event, SiteID: "trickle", PlanID: "plan-" + strconv.Itoa(i), WebsiteVersion: "v1",
			SourceSequence: json.Number(strconv.Itoa(i + 1)), JobCount: "1", ChangeSHA256: ack.Digest([]byte("change-" + event)),
			LifecycleBindingSHA256: ack.Digest([]byte("binding")), TerminalStatus: "published",
			LifecycleSHA256: &lifecycle,
		})
		if err != nil {
			return err
		}
		body, err := t.Payload()
		if err != nil {
			return err
		}
		req, err := http.NewRequest(http.MethodPost, "http://"+addr+"/terminal", bytes.NewReader(body))
		if err != nil {
			return err
		}
		req.Header.Set("Content-Type", "application/json")
		if err := signer.Sign(req, signature.Message{ID: t.NotificationID, Body: body, Time: time.Now()}); err != nil {
			return err
		}
		resp, err := c.Do(req)
		if err != nil {
			return err
		}
		got, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("warm-up delivery answered %d: %s", resp.StatusCode, got)
		}
	}
	return nil
}
