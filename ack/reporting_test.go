package ack_test

import (
	"encoding/json"
	"errors"
	"maps"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/ack"
	"github.com/courier-go/courier/internal/canonical"
	"github.com/courier-go/courier/internal/jsonbody"
)

// envelopeVectors is testdata/adcp/webhook-receiver-envelope.json, AdCP's
// receiver-envelope compliance vectors (Apache-2.0, see its LICENSE).
type envelopeVectors struct {
	Positive []struct {
		ID          string          `json:"id"`
		SameEventAs string          `json:"same_event_as"`
		Payload     json.RawMessage `json:"payload"`
	} `json:"positive"`
	Negative []struct {
		ID            string          `json:"id"`
		ExpectedError string          `json:"expected_error"`
		Payload       json.RawMessage `json:"payload"`
	} `json:"negative"`
}

func loadEnvelopeVectors(t *testing.T) envelopeVectors {
	t.Helper()
	b, err := os.ReadFile("testdata/adcp/webhook-receiver-envelope.json")
	if err != nil {
		t.Fatal(err)
	}
	var v envelopeVectors
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	if len(v.Positive) < 2 || len(v.Negative) < 3 {
		t.Fatalf("only %d positive and %d negative vectors", len(v.Positive), len(v.Negative))
	}
	return v
}

// decodeReporting decodes and validates b as a receiver does, returning
// the field errors.
func decodeReporting(t *testing.T, b []byte) (ack.Reporting, *ack.ValidationError) {
	t.Helper()
	var r ack.Reporting
	if err := json.Unmarshal(b, &r); err != nil {
		ve := jsonbody.DecodeError(err)
		if ve == nil {
			t.Fatalf("decode error %v names no field", err)
		}
		return r, ve
	}
	err := ack.Validate(r)
	if err == nil {
		return r, nil
	}
	if !errors.Is(err, courier.CodePayloadInvalid) {
		t.Fatalf("Validate = %v, want a case of CodePayloadInvalid", err)
	}
	var ve *ack.ValidationError
	if !errors.As(err, &ve) {
		t.Fatalf("Validate = %v, want a *ValidationError", err)
	}
	return r, ve
}

// envelopeErrors is what each expected_error of the vectors means as
// field errors. A vector with an expected_error not listed here fails the
// test, so new vectors are read, not skipped.
var envelopeErrors = map[string][]ack.FieldError{
	"missing_envelope_fields": {
		{Field: "idempotency_key", Rule: "required"}, {Field: "operation_id", Rule: "required"},
		{Field: "task_id", Rule: "required"}, {Field: "task_type", Rule: "required"},
		{Field: "status", Rule: "required"}, {Field: "timestamp", Rule: "required"},
	},
	"missing_idempotency_key": {{Field: "idempotency_key", Rule: "required"}},
	"invalid_envelope_status": {{Field: "status", Rule: "oneof"}},
}

func TestReportingVectors(t *testing.T) {
	t.Parallel()
	v := loadEnvelopeVectors(t)
	byID := map[string]json.RawMessage{}
	for _, p := range v.Positive {
		t.Run(p.ID, func(t *testing.T) {
			r, ve := decodeReporting(t, p.Payload)
			if ve != nil {
				t.Fatalf("positive vector refused: %v", ve)
			}
			if !r.IsDeliveryReport() || r.DedupeKey() != r.IdempotencyKey || r.DedupeKey() == "" {
				t.Fatalf("delivery report %v, dedupe key %q", r.IsDeliveryReport(), r.DedupeKey())
			}
		})
		byID[p.ID] = p.Payload
	}
	for _, p := range v.Positive {
		if p.SameEventAs == "" {
			continue
		}
		first, ok := byID[p.SameEventAs]
		if !ok {
			t.Fatalf("%s: same_event_as %q names no vector", p.ID, p.SameEventAs)
		}
		a, errA := canonical.JCS(first)
		b, errB := canonical.JCS(p.Payload)
		if errA != nil || errB != nil || string(a) != string(b) {
			t.Fatalf("%s: a retry of %s is not the same JCS document", p.ID, p.SameEventAs)
		}
	}
	for _, n := range v.Negative {
		t.Run(n.ID, func(t *testing.T) {
			want, ok := envelopeErrors[n.ExpectedError]
			if !ok {
				t.Fatalf("expected_error %q has no meaning in this test yet", n.ExpectedError)
			}
			_, ve := decodeReporting(t, n.Payload)
			if ve == nil {
				t.Fatal("negative vector accepted")
			}
			for _, f := range want {
				if !slices.Contains(ve.Fields, f) {
					t.Errorf("%s: field errors %v lack %v", n.ExpectedError, ve.Fields, f)
				}
			}
		})
	}
}

func TestReportingValidation(t *testing.T) {
	t.Parallel()
	base := loadEnvelopeVectors(t).Positive[0].Payload
	deliveries := func(m map[string]any) map[string]any {
		return m["result"].(map[string]any)["media_buy_deliveries"].([]any)[0].(map[string]any)
	}
	result := func(m map[string]any) map[string]any { return m["result"].(map[string]any) }
	tests := []struct {
		name string
		edit func(m map[string]any)
		want []ack.FieldError // nil: valid
	}{
		{"vector as is", func(map[string]any) {}, nil},
		// idempotency_key is 16 to 255 characters, the bounds included.
		{"key of 16", func(m map[string]any) { m["idempotency_key"] = strings.Repeat("k", 16) }, nil},
		{"key of 15", func(m map[string]any) { m["idempotency_key"] = strings.Repeat("k", 15) }, []ack.FieldError{{Field: "idempotency_key", Rule: "min"}}},
		{"key of 255", func(m map[string]any) { m["idempotency_key"] = strings.Repeat("k", 255) }, nil},
		{"key of 256", func(m map[string]any) { m["idempotency_key"] = strings.Repeat("k", 256) }, []ack.FieldError{{Field: "idempotency_key", Rule: "max"}}},
		{"sequence number 1", func(m map[string]any) { result(m)["sequence_number"] = 1 }, nil},
		{"sequence number 0", func(m map[string]any) { result(m)["sequence_number"] = 0 }, []ack.FieldError{{Field: "result.sequence_number", Rule: "min"}}},
		{"other members allowed", func(m map[string]any) { m["ext"] = map[string]any{"x": 1}; m["protocol"] = "media-buy" }, nil},
		{"optional members", func(m map[string]any) {
			m["notification_id"] = "task_456.terminal"
			m["context_id"] = "ctx_1"
			m["token"] = strings.Repeat("t", 16)
		}, nil},
		{"timestamp with offset", func(m map[string]any) { m["timestamp"] = "2026-05-26T11:00:44+02:00" }, nil},
		{"result not a delivery report", func(m map[string]any) {
			m["task_type"] = "create_media_buy"
			m["result"] = map[string]any{"media_buy_id": "mb_1", "sequence_number": 0}
		}, nil},
		{"result an array", func(m map[string]any) { m["result"] = []any{1} }, nil},
		{"no result", func(m map[string]any) { delete(m, "result") }, nil},
		{"empty deliveries", func(m map[string]any) { result(m)["media_buy_deliveries"] = []any{} }, nil},
		{"no sequence number", func(m map[string]any) { delete(result(m), "sequence_number") }, nil},
		// JSON Schema's integer and RFC 3339's date-time, as AdCP's schemas
		// mean them: an integral number however written, a lower-case t or z.
		{"sequence number written 31.0", func(m map[string]any) { result(m)["sequence_number"] = json.RawMessage("31.0") }, nil},
		{"sequence number written 3.1e1", func(m map[string]any) { result(m)["sequence_number"] = json.RawMessage("3.1e1") }, nil},
		{"sequence number written 0.0310e3", func(m map[string]any) { result(m)["sequence_number"] = json.RawMessage("0.0310e3") }, nil},
		{"sequence number past 2^53 written 9007199254740993.0", func(m map[string]any) { result(m)["sequence_number"] = json.RawMessage("9007199254740993.0") }, nil},
		{"timestamp in lower case", func(m map[string]any) { m["timestamp"] = "2026-05-26t09:00:44.5z" }, nil},
		{"period in lower case", func(m map[string]any) { result(m)["reporting_period"].(map[string]any)["end"] = "2026-05-26t00:00:00z" }, nil},
		// RFC 3339's date-time exactly: its leap second, and no looser form.
		{"timestamp 2026-05-26T09:00:44.123456789012Z", func(m map[string]any) { m["timestamp"] = "2026-05-26T09:00:44.123456789012Z" }, nil},
		{"timestamp 1998-12-31T23:59:60Z", func(m map[string]any) { m["timestamp"] = "1998-12-31T23:59:60Z" }, nil},
		{"timestamp 1998-12-31T15:59:60.123-08:00", func(m map[string]any) { m["timestamp"] = "1998-12-31T15:59:60.123-08:00" }, nil},
		{"timestamp 2024-02-29T00:00:00+23:59", func(m map[string]any) { m["timestamp"] = "2024-02-29T00:00:00+23:59" }, nil},
		{"timestamp 2026-05-26T9:00:44Z", func(m map[string]any) { m["timestamp"] = "2026-05-26T9:00:44Z" }, []ack.FieldError{{Field: "timestamp", Rule: "datetime"}}},
		{"timestamp 2026-05-26T09:00:44,5Z", func(m map[string]any) { m["timestamp"] = "2026-05-26T09:00:44,5Z" }, []ack.FieldError{{Field: "timestamp", Rule: "datetime"}}},
		{"timestamp 1998-12-31T23:58:60Z", func(m map[string]any) { m["timestamp"] = "1998-12-31T23:58:60Z" }, []ack.FieldError{{Field: "timestamp", Rule: "datetime"}}},
		{"timestamp 2026-02-30T00:00:00Z", func(m map[string]any) { m["timestamp"] = "2026-02-30T00:00:00Z" }, []ack.FieldError{{Field: "timestamp", Rule: "datetime"}}},
		{"timestamp 2025-02-29T00:00:00Z", func(m map[string]any) { m["timestamp"] = "2025-02-29T00:00:00Z" }, []ack.FieldError{{Field: "timestamp", Rule: "datetime"}}},
		{"timestamp 2026-05-26T09:00:44+24:00", func(m map[string]any) { m["timestamp"] = "2026-05-26T09:00:44+24:00" }, []ack.FieldError{{Field: "timestamp", Rule: "datetime"}}},
		{"timestamp 2026-05-26T09:00:44.Z", func(m map[string]any) { m["timestamp"] = "2026-05-26T09:00:44.Z" }, []ack.FieldError{{Field: "timestamp", Rule: "datetime"}}},
		{"timestamp 2026-05-26T09:00:44", func(m map[string]any) { m["timestamp"] = "2026-05-26T09:00:44" }, []ack.FieldError{{Field: "timestamp", Rule: "datetime"}}},
		{"timestamp 2026-05-26T09:00:44+0200", func(m map[string]any) { m["timestamp"] = "2026-05-26T09:00:44+0200" }, []ack.FieldError{{Field: "timestamp", Rule: "datetime"}}},
		{"timestamp 2026-05-26T24:00:00Z", func(m map[string]any) { m["timestamp"] = "2026-05-26T24:00:00Z" }, []ack.FieldError{{Field: "timestamp", Rule: "datetime"}}},
		{"timestamp 2026-05-26T09:60:00Z", func(m map[string]any) { m["timestamp"] = "2026-05-26T09:60:00Z" }, []ack.FieldError{{Field: "timestamp", Rule: "datetime"}}},
		{"timestamp 2026-05-26T09:00:61Z", func(m map[string]any) { m["timestamp"] = "2026-05-26T09:00:61Z" }, []ack.FieldError{{Field: "timestamp", Rule: "datetime"}}},
		{"timestamp 2026-05-26T09:00:44Zz", func(m map[string]any) { m["timestamp"] = "2026-05-26T09:00:44Zz" }, []ack.FieldError{{Field: "timestamp", Rule: "datetime"}}},
		{"timestamp +2026-05-26T09:00:44Z", func(m map[string]any) { m["timestamp"] = "+2026-05-26T09:00:44Z" }, []ack.FieldError{{Field: "timestamp", Rule: "datetime"}}},

		{"key too short", func(m map[string]any) { m["idempotency_key"] = "whk_short" }, []ack.FieldError{{Field: "idempotency_key", Rule: "min"}}},
		{"key too long", func(m map[string]any) { m["idempotency_key"] = strings.Repeat("k", 256) }, []ack.FieldError{{Field: "idempotency_key", Rule: "max"}}},
		{"key with a space", func(m map[string]any) { m["idempotency_key"] = "whk 0123456789abcdef" }, []ack.FieldError{{Field: "idempotency_key", Rule: "courier_token"}}},
		{"key a number", func(m map[string]any) { m["idempotency_key"] = 12345678901234567 }, []ack.FieldError{{Field: "idempotency_key", Rule: "type"}}},
		{"empty operation_id", func(m map[string]any) { m["operation_id"] = "" }, []ack.FieldError{{Field: "operation_id", Rule: "required"}}},
		{"no task_id", func(m map[string]any) { delete(m, "task_id") }, []ack.FieldError{{Field: "task_id", Rule: "required"}}},
		{"media buy status", func(m map[string]any) { m["status"] = "active" }, []ack.FieldError{{Field: "status", Rule: "oneof"}}},
		{"status a number", func(m map[string]any) { m["status"] = 1 }, []ack.FieldError{{Field: "status", Rule: "type"}}},
		{"timestamp not RFC 3339", func(m map[string]any) { m["timestamp"] = "2026-05-26 09:00:44Z" }, []ack.FieldError{{Field: "timestamp", Rule: "datetime"}}},
		{"timestamp a date", func(m map[string]any) { m["timestamp"] = "2026-05-26" }, []ack.FieldError{{Field: "timestamp", Rule: "datetime"}}},
		{"notification_id not a token", func(m map[string]any) { m["notification_id"] = "a b" }, []ack.FieldError{{Field: "notification_id", Rule: "courier_token"}}},
		{"short token", func(m map[string]any) { m["token"] = "short" }, nil},
		{"long token", func(m map[string]any) { m["token"] = strings.Repeat("t", 4097) }, nil},

		// A notification_type outside a delivery report's is another of
		// AdCP's notification families (impairment, creative, account, …):
		// its result is the application's to read, never refused for good.
		{"another family's notification type", func(m map[string]any) { result(m)["notification_type"] = "impairment" }, nil},
		{"null notification type", func(m map[string]any) { result(m)["notification_type"] = nil }, nil},
		{"sequence number 0", func(m map[string]any) { result(m)["sequence_number"] = 0 }, []ack.FieldError{{Field: "result.sequence_number", Rule: "min"}}},
		{"sequence number a string", func(m map[string]any) { result(m)["sequence_number"] = "31" }, []ack.FieldError{{Field: "result.sequence_number", Rule: "type"}}},
		{"sequence number a fraction", func(m map[string]any) { result(m)["sequence_number"] = 1.5 }, []ack.FieldError{{Field: "result.sequence_number", Rule: "type"}}},
		{"sequence number 0.0", func(m map[string]any) { result(m)["sequence_number"] = json.RawMessage("0.0") }, []ack.FieldError{{Field: "result.sequence_number", Rule: "min"}}},
		{"sequence number past int64", func(m map[string]any) { result(m)["sequence_number"] = json.RawMessage("9223372036854775808") }, []ack.FieldError{{Field: "result.sequence_number", Rule: "type"}}},
		{"sequence number past int64, in an exponent", func(m map[string]any) { result(m)["sequence_number"] = json.RawMessage("1e300") }, []ack.FieldError{{Field: "result.sequence_number", Rule: "type"}}},
		{"sequence number past int32's exponents", func(m map[string]any) { result(m)["sequence_number"] = json.RawMessage("1e99999999999") }, []ack.FieldError{{Field: "result.sequence_number", Rule: "type"}}},
		// Integral or not by the decimal digits, not by the nearest float64.
		{"sequence number a fraction a float64 rounds away", func(m map[string]any) { result(m)["sequence_number"] = json.RawMessage("31.000000000000001") }, []ack.FieldError{{Field: "result.sequence_number", Rule: "type"}}},
		{"sequence number a fraction past 2^52", func(m map[string]any) { result(m)["sequence_number"] = json.RawMessage("4503599627370496.5") }, []ack.FieldError{{Field: "result.sequence_number", Rule: "type"}}},
		{"sequence number a fraction a float64 rounds to zero", func(m map[string]any) { result(m)["sequence_number"] = json.RawMessage("1e-400") }, []ack.FieldError{{Field: "result.sequence_number", Rule: "type"}}},
		{"sequence number -0", func(m map[string]any) { result(m)["sequence_number"] = json.RawMessage("-0") }, []ack.FieldError{{Field: "result.sequence_number", Rule: "min"}}},
		// encoding/json names the first member of the wrong type; the
		// sequence number, read apart, comes after the others.
		{"sequence number and currency of the wrong types", func(m map[string]any) {
			result(m)["currency"] = 5
			result(m)["sequence_number"] = 1.5
		}, []ack.FieldError{{Field: "result.currency", Rule: "type"}}},
		{"sequence number a bool", func(m map[string]any) { result(m)["sequence_number"] = true }, []ack.FieldError{{Field: "result.sequence_number", Rule: "type"}}},
		{"timestamp with a lower-case separator other than t", func(m map[string]any) { m["timestamp"] = "2026-05-26x09:00:44z" }, []ack.FieldError{{Field: "timestamp", Rule: "datetime"}}},
		{"no reporting period", func(m map[string]any) { delete(result(m), "reporting_period") }, []ack.FieldError{{Field: "result.reporting_period", Rule: "required"}}},
		{"period end not a date-time", func(m map[string]any) { result(m)["reporting_period"].(map[string]any)["end"] = "2026-05-25" }, []ack.FieldError{{Field: "result.reporting_period.end", Rule: "datetime"}}},
		{"lowercase currency", func(m map[string]any) { result(m)["currency"] = "usd" }, []ack.FieldError{{Field: "result.currency", Rule: "uppercase"}}},
		{"two-letter currency", func(m map[string]any) { result(m)["currency"] = "US" }, []ack.FieldError{{Field: "result.currency", Rule: "len"}}},
		{"no currency", func(m map[string]any) { delete(result(m), "currency") }, []ack.FieldError{{Field: "result.currency", Rule: "required"}}},
		{"no deliveries", func(m map[string]any) { delete(result(m), "media_buy_deliveries") }, []ack.FieldError{{Field: "result.media_buy_deliveries", Rule: "required"}}},
		{"delivery status", func(m map[string]any) { deliveries(m)["status"] = "live" }, []ack.FieldError{{Field: "result.media_buy_deliveries[0].status", Rule: "oneof"}}},
		{"delivery without media buy", func(m map[string]any) { delete(deliveries(m), "media_buy_id") }, []ack.FieldError{{Field: "result.media_buy_deliveries[0].media_buy_id", Rule: "required"}}},
		{"spend in the second delivery a string", func(m map[string]any) {
			second := maps.Clone(deliveries(m))
			second["totals"] = map[string]any{"spend": "12"}
			result(m)["media_buy_deliveries"] = append(result(m)["media_buy_deliveries"].([]any), second)
		}, []ack.FieldError{{Field: "result.media_buy_deliveries[1].totals.spend", Rule: "type"}}},
		{"negative spend", func(m map[string]any) { deliveries(m)["totals"].(map[string]any)["spend"] = -1 }, []ack.FieldError{{Field: "result.media_buy_deliveries[0].totals.spend", Rule: "min"}}},
		{"package without spend", func(m map[string]any) { deliveries(m)["by_package"] = []any{map[string]any{"package_id": "p1"}} }, []ack.FieldError{{Field: "result.media_buy_deliveries[0].by_package[0].spend", Rule: "required"}}},
		{"no by_package", func(m map[string]any) { delete(deliveries(m), "by_package") }, []ack.FieldError{{Field: "result.media_buy_deliveries[0].by_package", Rule: "required"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var m map[string]any
			if err := json.Unmarshal(base, &m); err != nil {
				t.Fatal(err)
			}
			tt.edit(m)
			b, err := json.Marshal(m)
			if err != nil {
				t.Fatal(err)
			}
			_, ve := decodeReporting(t, b)
			var got []ack.FieldError
			if ve != nil {
				got = ve.Fields
			}
			if !slices.Equal(got, tt.want) {
				t.Fatalf("field errors %v, want %v", got, tt.want)
			}
		})
	}
}

// TestReportingRefusesCaseVariantsInResult: Check decoded the delivery
// report with plain encoding/json, which takes "CURRENCY" for currency,
// the later member winning; so {"currency":"not-a-currency","CURRENCY":"USD"}
// was validated on the spelling no one else reads and accepted, while an
// application reading result["currency"] got "not-a-currency". A member
// that matches a field of the report only case-insensitively, at any
// depth, is now refused, named under "result." with rule unknown, as the
// envelope's own are.
func TestReportingRefusesCaseVariantsInResult(t *testing.T) {
	t.Parallel()
	const head = `{"notification_type":"final","reporting_period":{"start":"2026-01-02T03:04:05Z","end":"2026-01-03T03:04:05Z"},`
	const delivery = `{"media_buy_id":"mb_1","status":"active","totals":{"spend":1},"by_package":[{"spend":2}]}`
	for _, tt := range []struct {
		name   string
		result string
		want   []ack.FieldError // nil: valid
	}{
		{"exact names", head + `"currency":"USD","media_buy_deliveries":[` + delivery + `]}`, nil},
		{"a case variant after the exact name", head + `"currency":"not-a-currency","CURRENCY":"USD","media_buy_deliveries":[]}`,
			[]ack.FieldError{{Field: "result.CURRENCY", Rule: "unknown"}}},
		{"a case variant alone", head + `"Currency":"USD","media_buy_deliveries":[]}`,
			[]ack.FieldError{{Field: "result.Currency", Rule: "unknown"}}},
		{"the report's type itself", strings.Replace(head, `"notification_type"`, `"NOTIFICATION_TYPE"`, 1) + `"currency":"USD","media_buy_deliveries":[]}`,
			[]ack.FieldError{{Field: "result.NOTIFICATION_TYPE", Rule: "unknown"}}},
		{"in the reporting period", `{"notification_type":"final","reporting_period":{"start":"2026-01-02T03:04:05Z","end":"x","END":"2026-01-03T03:04:05Z"},` +
			`"currency":"USD","media_buy_deliveries":[]}`, []ack.FieldError{{Field: "result.reporting_period.END", Rule: "unknown"}}},
		{"in a delivery", head + `"currency":"USD","media_buy_deliveries":[` + strings.Replace(delivery, `"status":"active"`, `"status":"live","Status":"active"`, 1) + `]}`,
			[]ack.FieldError{{Field: "result.media_buy_deliveries[0].Status", Rule: "unknown"}}},
		{"in a package row", head + `"currency":"USD","media_buy_deliveries":[` + strings.Replace(delivery, `[{"spend":2}]`, `[{"spend":-1,"SPEND":2}]`, 1) + `]}`,
			[]ack.FieldError{{Field: "result.media_buy_deliveries[0].by_package[0].SPEND", Rule: "unknown"}}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := ack.Reporting{Result: json.RawMessage(tt.result)}.Check()
			var got []ack.FieldError
			var ve *ack.ValidationError
			if errors.As(err, &ve) {
				got = ve.Fields
			} else if err != nil {
				t.Fatalf("Check = %v, want a *ValidationError", err)
			}
			if !slices.Equal(got, tt.want) {
				t.Fatalf("field errors %v, want %v", got, tt.want)
			}
		})
	}
}

func TestReportingEnums(t *testing.T) {
	t.Parallel()
	base := loadEnvelopeVectors(t).Positive[0].Payload
	var r ack.Reporting
	if err := json.Unmarshal(base, &r); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"submitted", "working", "input-required", "completed", "canceled", "failed", "rejected", "auth-required", "unknown"} {
		r := r
		r.Status = s
		if err := ack.Validate(r); err != nil {
			t.Errorf("status %q: %v", s, err)
		}
	}
	for _, typ := range []string{"scheduled", "final", "delayed", "adjusted", "window_update"} {
		var m map[string]any
		json.Unmarshal(r.Result, &m)
		m["notification_type"] = typ
		r := r
		r.Result, _ = json.Marshal(m)
		if err := ack.Validate(r); err != nil {
			t.Errorf("notification_type %q: %v", typ, err)
		}
	}
}

func TestReportingRoundTrip(t *testing.T) {
	t.Parallel()
	r := ack.Reporting{
		IdempotencyKey: ack.NewIdempotencyKey(), OperationID: "op_1", TaskID: "task_1",
		TaskType: "create_media_buy", Status: "working", Timestamp: "2026-05-26T09:00:44.582Z",
	}
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"idempotency_key":"` + r.IdempotencyKey + `","operation_id":"op_1","task_id":"task_1","task_type":"create_media_buy","status":"working","timestamp":"2026-05-26T09:00:44.582Z"}`
	if string(b) != want {
		t.Fatalf("marshal = %s, want %s", b, want)
	}
	back, ve := decodeReporting(t, b)
	if ve != nil || back.IdempotencyKey != r.IdempotencyKey || back.IsDeliveryReport() {
		t.Fatalf("round trip = %+v, %v", back, ve)
	}
}

func TestNewIdempotencyKey(t *testing.T) {
	t.Parallel()
	pattern := regexp.MustCompile(`^[A-Za-z0-9_.:-]{16,255}$`) // the schema's
	seen := map[string]bool{}
	for range 100 {
		k := ack.NewIdempotencyKey()
		if !pattern.MatchString(k) || !strings.HasPrefix(k, "whk_") || len(k) != 4+32 {
			t.Fatalf("key %q does not match the pattern", k)
		}
		if seen[k] {
			t.Fatalf("key %q repeated", k)
		}
		seen[k] = true
	}
}

func TestReportingProfile(t *testing.T) {
	t.Parallel()
	p, ok := ack.Builtin(ack.ProfileReporting)
	if !ok || ack.ProfileReporting != "reporting" || p.Name != ack.ProfileReporting || p.Verify != nil {
		t.Fatalf("profile = %+v, want reporting without an expected Ack", p)
	}
}

// adcpSchema is the part of an AdCP JSON schema TestReportingMatchesSchemas
// reads.
type adcpSchema struct {
	Required             []string `json:"required"`
	AdditionalProperties bool     `json:"additionalProperties"`
	Properties           map[string]struct {
		Enum    []string `json:"enum"`
		Minimum *int     `json:"minimum"`
		Pattern string   `json:"pattern"`
	} `json:"properties"`
}

func loadSchema(t *testing.T, path string) adcpSchema {
	t.Helper()
	b, err := os.ReadFile("testdata/adcp/schemas/source/" + path)
	if err != nil {
		t.Fatal(err)
	}
	var s adcpSchema
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatal(err)
	}
	if len(s.Required) == 0 || len(s.Properties) == 0 {
		t.Fatalf("%s: no required members or properties", path)
	}
	return s
}

// TestReportingMatchesSchemas checks the envelope validation against the
// schemas the storyboard names, starting from the first positive vector:
// each member the envelope schema and the delivery-report schema require
// is refused when absent (notification_type aside: without it the result
// is no delivery report), each member they list but do not require may
// be left out, other members are allowed, each notification_type of the
// schema's enum makes a delivery report that is checked (another names
// another notification family, the application's to read), and
// sequence_number and currency keep their bounds.
func TestReportingMatchesSchemas(t *testing.T) {
	t.Parallel()
	envelope := loadSchema(t, "core/mcp-webhook-payload.json")
	report := loadSchema(t, "media-buy/media-buy-delivery-webhook-result.json")
	vector := loadEnvelopeVectors(t).Positive[0].Payload
	edited := func(t *testing.T, inResult bool, edit func(m map[string]any)) []byte {
		t.Helper()
		var m map[string]any
		if err := json.Unmarshal(vector, &m); err != nil {
			t.Fatal(err)
		}
		if inResult {
			edit(m["result"].(map[string]any))
		} else {
			edit(m)
		}
		b, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	check := func(t *testing.T, body []byte, want []ack.FieldError) {
		t.Helper()
		_, ve := decodeReporting(t, body)
		var got []ack.FieldError
		if ve != nil {
			got = ve.Fields
		}
		if !slices.Equal(got, want) {
			t.Errorf("field errors %v, want %v", got, want)
		}
	}
	for _, tc := range []struct {
		name     string
		schema   adcpSchema
		inResult bool
		prefix   string
	}{{"envelope", envelope, false, ""}, {"delivery report", report, true, "result."}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if !tc.schema.AdditionalProperties {
				t.Fatal("the schema allows no other members")
			}
			for name := range tc.schema.Properties {
				if name == "notification_type" {
					continue // the delivery report's discriminator: checked by its enum below
				}
				var want []ack.FieldError
				if slices.Contains(tc.schema.Required, name) {
					want = []ack.FieldError{{Field: tc.prefix + name, Rule: "required"}}
				}
				t.Run("without "+name, func(t *testing.T) {
					check(t, edited(t, tc.inResult, func(m map[string]any) { delete(m, name) }), want)
				})
			}
			check(t, edited(t, tc.inResult, func(m map[string]any) { m["x_other_member"] = map[string]any{"a": 1} }), nil)
		})
	}
	notificationTypes := report.Properties["notification_type"].Enum
	if len(notificationTypes) == 0 {
		t.Fatal("no notification_type enum")
	}
	for _, v := range notificationTypes {
		body := edited(t, true, func(m map[string]any) { m["notification_type"] = v })
		check(t, body, nil)
		if r, _ := decodeReporting(t, body); !r.IsDeliveryReport() {
			t.Errorf("notification_type %q is not taken for a delivery report", v)
		}
		// Every member the report requires is checked under each type.
		check(t, edited(t, true, func(m map[string]any) { m["notification_type"] = v; delete(m, "currency") }),
			[]ack.FieldError{{Field: "result.currency", Rule: "required"}})
	}
	if minimum := report.Properties["sequence_number"].Minimum; minimum == nil || *minimum != 1 {
		t.Fatalf("sequence_number minimum %v, want 1", minimum)
	}
	check(t, edited(t, true, func(m map[string]any) { m["sequence_number"] = 1 }), nil)
	check(t, edited(t, true, func(m map[string]any) { m["sequence_number"] = 0 }),
		[]ack.FieldError{{Field: "result.sequence_number", Rule: "min"}})
	currency := regexp.MustCompile(report.Properties["currency"].Pattern)
	for _, c := range []string{"EUR", "usd", "Eur", "EU", "EURO", "E1R", "ÉUR"} {
		refused := !currency.MatchString(c)
		_, ve := decodeReporting(t, edited(t, true, func(m map[string]any) { m["currency"] = c }))
		if (ve != nil) != refused || (ve != nil && (len(ve.Fields) != 1 || ve.Fields[0].Field != "result.currency")) {
			t.Errorf("currency %q: field errors %v, want refused = %v", c, ve, refused)
		}
	}
}
