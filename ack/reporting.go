package ack

import (
	"crypto/rand"
	"encoding/json"
	"errors"
	"slices"
	"strconv"
	"strings"

	"github.com/courier-go/courier/internal/strictjson"
	"github.com/courier-go/courier/internal/wire"
)

// Reporting is the AdCP webhook envelope (core/mcp-webhook-payload.json):
// the body a seller POSTs to a buyer's webhook for a task's status change
// or a delivery report. Members it does not declare are allowed and
// ignored.
//
// TaskType and Protocol are not checked against AdCP's enums, which grow
// between minor versions (delivery reports use media_buy_delivery, for
// one): a receiver must not refuse, for good, a delivery from a newer
// sender. Status is, because the conformance vectors require it. An empty
// string counts as absent: a required one is missing. A bare delivery
// report (notification_type at the top) lacks every required member.
type Reporting struct {
	// IdempotencyKey identifies the delivery: stable across retries of
	// the same payload, fresh for another. It is the dedupe key, scoped by
	// the verified sender. See NewIdempotencyKey.
	IdempotencyKey string `json:"idempotency_key" validate:"required,courier_token,min=16,max=255"`
	// NotificationID identifies the logical event across re-emissions:
	// deliveries under different idempotency keys that carry the same
	// value are one event. For a task webhook of a terminal Status
	// (completed, failed, canceled, rejected) AdCP forbids republishing
	// its effects, so handler.Reporting runs its function once per
	// (verified sender, TaskID, NotificationID) as well as once per
	// IdempotencyKey; for another status, or a notification of another
	// family (a Result whose notification_type names one), it is the
	// application's to read. A delivery report is such a notification,
	// whatever its notification_type (final too): AdCP has it leave
	// NotificationID out, and handler.Reporting dedupes it by
	// IdempotencyKey alone.
	NotificationID string `json:"notification_id,omitempty" validate:"omitempty,courier_token,max=255"`
	// OperationID is the buyer's correlation id, echoed verbatim.
	OperationID string `json:"operation_id" validate:"required"`
	TaskID      string `json:"task_id" validate:"required"`
	TaskType    string `json:"task_type" validate:"required"`
	Protocol    string `json:"protocol,omitempty"`
	// Status is one of AdCP's task statuses (enums/task-status.json),
	// which follow A2A's TaskState.
	Status string `json:"status" validate:"required,oneof=submitted working input-required completed canceled failed rejected auth-required unknown"`
	// Timestamp is when the delivery was first generated (RFC 3339); a
	// retry repeats it.
	Timestamp string `json:"timestamp" validate:"required,datetime=2006-01-02T15:04:05Z07:00"`
	Message   string `json:"message,omitempty"`
	ContextID string `json:"context_id,omitempty"`
	// Token is echoed from the push notification config. courier does not
	// check it, nor its length, as it holds no token to check it against:
	// if the application's AdCP setup uses one, the application compares
	// it with its own, in constant time (crypto/subtle).
	Token string `json:"token,omitempty"`
	// Result is the task's payload. A delivery report's
	// (media-buy/media-buy-delivery-webhook-result.json; see
	// IsDeliveryReport) fields Check validates; another's are the
	// application's to read. A delivery report must carry
	//
	//	notification_type     scheduled, final, delayed, adjusted or window_update
	//	reporting_period      {"start", "end"}, each RFC 3339
	//	currency              3 upper-case letters (ISO 4217)
	//	media_buy_deliveries  an array, each with media_buy_id, status (pending_creatives,
	//	                      pending_start, pending, active, paused, completed, rejected,
	//	                      canceled, failed or reporting_delayed), totals {"spend" >= 0}
	//	                      and by_package, an array of {"spend" >= 0}
	//
	// and may carry sequence_number (an integer >= 1); every other member
	// (impressions, package_id, …) is the application's. The outbox does
	// not check an envelope it enqueues (store.EnqueueParams.Payload):
	// Validate one before enqueueing it, or a reporting receiver refuses it
	// 400 validation_failed at every attempt.
	Result json.RawMessage `json:"result,omitempty"`
}

// DedupeKey returns the idempotency_key, a receiver's dedupe key.
func (r Reporting) DedupeKey() string { return r.IdempotencyKey }

// deliveryReportTypes are the notification_type values of a delivery
// report (its deliveryReport field's oneof).
var deliveryReportTypes = []string{"scheduled", "final", "delayed", "adjusted", "window_update"}

// IsDeliveryReport reports whether r.Result is a delivery report: an
// object whose notification_type is one of a delivery report's
// (scheduled, final, delayed, adjusted, window_update), the member's name
// spelled in any case (encoding/json
// would decode "NOTIFICATION_TYPE" into the field, so such a result is
// checked, and Check refuses the spelling). AdCP's other notification
// families (impairment, creative, account, …) are not: their results are
// the application's to read.
func (r Reporting) IsDeliveryReport() bool {
	return slices.ContainsFunc(wire.NotificationTypes(r.Result), func(t string) bool { return slices.Contains(deliveryReportTypes, t) })
}

// Check validates r.Result when it is a delivery report; field errors are
// named under "result." ("result.sequence_number"). A member whose name
// matches a field of the report only case-insensitively ("CURRENCY") is
// refused, as the envelope's are: decoded, it would be taken for that
// field, validated or not in place of the exact one.
func (r Reporting) Check() error {
	if !r.IsDeliveryReport() {
		return nil
	}
	if variants := strictjson.CheckVariants(r.Result, (*deliveryReport)(nil)); len(variants) > 0 { // its other members are the application's
		ve := &ValidationError{}
		for _, v := range variants {
			ve.Fields = append(ve.Fields, FieldError{Field: v, Rule: "unknown"})
		}
		return inResult(ve)
	}
	var ve *ValidationError
	// sequence_number is read apart, as a JSON Schema integer (jsonInteger),
	// after the other members' types are checked.
	var raw struct {
		deliveryReport
		SequenceNumber json.RawMessage `json:"sequence_number"`
	}
	if err := json.Unmarshal(r.Result, &raw); err != nil {
		if path, ok := strictjson.PathOf(r.Result, &raw, err); ok { // with its indexes, as validation names it
			return &ValidationError{Fields: []FieldError{{Field: "result." + path, Rule: "type"}}}
		}
		return &ValidationError{Fields: []FieldError{{Field: "result", Rule: "type"}}}
	}
	d := raw.deliveryReport
	if raw.SequenceNumber != nil && string(raw.SequenceNumber) != "null" {
		n, ok := jsonInteger(raw.SequenceNumber)
		if !ok {
			return &ValidationError{Fields: []FieldError{{Field: "result.sequence_number", Rule: "type"}}}
		}
		d.SequenceNumber = &n
	}
	err := Validate(d)
	if !errors.As(err, &ve) {
		return err
	}
	return inResult(ve)
}

// inResult names ve's fields under "result.".
func inResult(ve *ValidationError) *ValidationError {
	for i := range ve.Fields {
		ve.Fields[i].Field = "result." + ve.Fields[i].Field
	}
	return ve
}

// deliveryReport is what the reporting profile checks of a delivery
// report; its other members are left to the application.
type deliveryReport struct {
	NotificationType   string             `json:"notification_type" validate:"required,oneof=scheduled final delayed adjusted window_update"`
	SequenceNumber     *int64             `json:"sequence_number" validate:"omitnil,min=1"`
	ReportingPeriod    *reportingPeriod   `json:"reporting_period" validate:"required"`
	Currency           string             `json:"currency" validate:"required,len=3,alpha,uppercase"`
	MediaBuyDeliveries []mediaBuyDelivery `json:"media_buy_deliveries" validate:"required,dive"`
}

// jsonInteger returns the value of a JSON number that is a JSON Schema
// integer: one whose value is integral however it is written (31, 31.0,
// 3.1e1), decided on its decimal digits, within int64. ok is false for a
// fraction, a value past int64, and anything but a number.
func jsonInteger(b []byte) (n int64, ok bool) {
	s := string(b)
	sign := ""
	if strings.HasPrefix(s, "-") {
		sign, s = "-", s[1:]
	}
	mantissa, exp, hasExp := strings.Cut(strings.ToLower(s), "e")
	whole, frac, _ := strings.Cut(mantissa, ".")
	if whole == "" || !allDigits(whole) || !allDigits(frac) {
		return 0, false
	}
	shift := -len(frac) // the power of ten the digits are scaled by
	if hasExp {
		// Past int32 the exponent is clamped: the value is then zero, or
		// under one, or past int64, whatever its exact size.
		e, err := strconv.ParseInt(exp, 10, 32)
		if err != nil && !errors.Is(err, strconv.ErrRange) {
			return 0, false
		}
		shift += int(e)
	}
	digits := strings.TrimLeft(whole+frac, "0")
	if digits == "" {
		return 0, true // zero, however written
	}
	if shift < 0 { // the last -shift digits are after the point: all zeros, or a fraction
		if -shift > len(digits) || strings.TrimRight(digits[len(digits)+shift:], "0") != "" {
			return 0, false
		}
		digits, shift = digits[:len(digits)+shift], 0
	}
	if len(digits)+shift > 19 { // past int64's 19 digits
		return 0, false
	}
	n, err := strconv.ParseInt(sign+digits+strings.Repeat("0", shift), 10, 64)
	return n, err == nil
}

func allDigits(s string) bool {
	for _, c := range []byte(s) {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

type reportingPeriod struct {
	Start string `json:"start" validate:"required,datetime=2006-01-02T15:04:05Z07:00"`
	End   string `json:"end" validate:"required,datetime=2006-01-02T15:04:05Z07:00"`
}

type mediaBuyDelivery struct {
	MediaBuyID string  `json:"media_buy_id" validate:"required"`
	Status     string  `json:"status" validate:"required,oneof=pending_creatives pending_start pending active paused completed rejected canceled failed reporting_delayed"`
	Totals     *spent  `json:"totals" validate:"required"`
	ByPackage  []spent `json:"by_package" validate:"required,dive"`
}

// spent is the part of core/delivery-metrics.json a delivery row requires.
type spent struct {
	Spend *float64 `json:"spend" validate:"required,min=0"`
}

// NewIdempotencyKey returns a fresh idempotency_key for a sender: "whk_"
// and 32 base32 characters of 160 random bits. Use one per delivery and
// repeat it, with the identical payload, on every retry.
func NewIdempotencyKey() string {
	var b [20]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand crashes the program instead)
	return wire.IdempotencyKey(b)
}
