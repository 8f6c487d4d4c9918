// Package wire holds the lexical checks of courier's wire formats that
// several packages apply: tokens, digests, codes and the attempt header,
// and the few values both ends of the contract share. Package ack
// documents the formats; this package only recognizes them.
package wire

import (
	"bytes"
	"encoding/base32"
	"encoding/json"
	"strconv"
	"strings"
	"time"

	"github.com/courier-go/courier/internal/strictjson"
)

// What the two ends of the contract agree on besides the formats.
const (
	// UserAgent is the User-Agent of every attempt.
	UserAgent = "courier/1"
	// MaxAckSize bounds the answer a sender reads and judges: an Ack, or
	// a command response.
	MaxAckSize = 16 << 10
	// RetryHorizon is how long a courier sender retries one delivery
	// unless told otherwise (store.Config.RetryHorizon's default), and so
	// how long a receiver's dedupe must last by default
	// (handler.ReportingConfig.RetryHorizon's).
	RetryHorizon = 72 * time.Hour
	// MaxAttemptTimeout is the longest a courier sender waits for one
	// attempt's answer (client.Config.Timeout's bound): an attempt started
	// just before its delivery's horizon ends may reach the receiver that
	// much later, so a receiver's dedupe must outlast the horizon by it.
	MaxAttemptTimeout = time.Hour
	// MaxBody is the largest request body a courier receiver reads unless
	// it is configured to read more (middleware.BodyLimits.MaxBytes), and
	// so the largest command a sender enqueues: 1 MiB.
	MaxBody = 1 << 20
	// CommandResponseSchema is the schema of a source's answer to a
	// command (ack.CommandResponse), which package handler writes and
	// package ack verifies.
	CommandResponseSchema = "courier.source-command-response.v1"
)

// IsDigest reports whether s is a digest as ack.Digest writes it: 64
// lowercase hex characters.
func IsDigest(s string) bool {
	if len(s) != 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

// TokenRule says what IsToken takes, for the messages that refuse one.
const TokenRule = "1-256 of A-Z a-z 0-9 _ . : -"

// IsToken reports whether s is a token: a notification id, key id or code:
// 1 to 256 characters of A-Z a-z 0-9 _ . : - (TokenRule).
func IsToken(s string) bool {
	if len(s) == 0 || len(s) > 256 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_' || c == '.' || c == ':' || c == '-') {
			return false
		}
	}
	return true
}

// IsVisible reports whether s is 1 to max bytes of visible ASCII (! to
// ~): an owner or an ordering key, which are stored and logged as they are.
func IsVisible(s string, max int) bool {
	if len(s) == 0 || len(s) > max {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] <= ' ' || s[i] > '~' {
			return false
		}
	}
	return true
}

// IsCode reports whether s has a code's form: a lowercase letter, then up
// to 127 of a-z 0-9 _ . -. Codes from outside courier (a receiver's own,
// in its problem body) are kept only when they are valid.
func IsCode[S ~string](s S) bool {
	if len(s) == 0 || len(s) > 128 || s[0] < 'a' || s[0] > 'z' {
		return false
	}
	for i := 1; i < len(s); i++ {
		b := s[i]
		if !('a' <= b && b <= 'z' || '0' <= b && b <= '9' || b == '_' || b == '.' || b == '-') {
			return false
		}
	}
	return true
}

// ParseAttempt reads a Courier-Attempt header value: a decimal integer
// 1..1000 without leading zeros.
func ParseAttempt(s string) (int, bool) {
	if s == "" || len(s) > 4 || s[0] < '1' || s[0] > '9' {
		return 0, false
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > 1000 {
		return 0, false
	}
	return n, true
}

// idempotencyKeyEncoding writes bytes in characters an idempotency_key
// allows.
var idempotencyKeyEncoding = base32.StdEncoding.WithPadding(base32.NoPadding)

// IdempotencyKey returns the idempotency_key form of 160 bits: "whk_" and
// 32 base32 characters, as ack.NewIdempotencyKey documents it.
func IdempotencyKey(bits [20]byte) string {
	return "whk_" + idempotencyKeyEncoding.EncodeToString(bits[:])
}

// NotificationTypes are the notification_type values an AdCP reporting
// result names: the non-empty strings of its members of that name,
// spelled in any case (encoding/json would decode "NOTIFICATION_TYPE"
// into such a field), the last of members of one name; none if result is
// no object. The members are read in place and only those of that name
// kept: a result may hold any number of the application's own.
func NotificationTypes(result []byte) []string {
	if !json.Valid(result) {
		return nil
	}
	type member struct {
		name  string
		value []byte
	}
	var named []member     // the members of that name, the last of each spelling
	at := map[string]int{} // where each spelling is in named: a result may spell it 2^17 ways
	for key, value := range strictjson.Members(result) {
		if name, ok := notificationTypeName(key); ok {
			if j, seen := at[name]; seen {
				named[j].value = value
			} else {
				at[name] = len(named)
				named = append(named, member{name: name, value: value})
			}
		}
	}
	var types []string
	for _, m := range named {
		var t string
		if json.Unmarshal(m.value, &t) == nil && t != "" {
			types = append(types, t)
		}
	}
	return types
}

// notificationTypeName returns the name key, a member's name as it stands
// in a valid document (quoted, perhaps escaped), spells, where that is
// notification_type in some case.
func notificationTypeName(key []byte) (string, bool) {
	const want = "notification_type"
	raw := key[1 : len(key)-1]
	if !bytes.ContainsRune(raw, '\\') {
		if !bytes.EqualFold(raw, []byte(want)) {
			return "", false
		}
		return string(raw), true
	}
	var name string
	if json.Unmarshal(key, &name) != nil {
		return "", false
	}
	return name, strings.EqualFold(name, want)
}
