package wire

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
)

func TestParseAttempt(t *testing.T) {
	t.Parallel()
	for s, want := range map[string]int{"1": 1, "20": 20, "1000": 1000, "0": 0, "01": 0, "1001": 0, "": 0, "-1": 0, "x": 0, "+1": 0} {
		got, ok := ParseAttempt(s)
		if ok != (want != 0) || got != want {
			t.Errorf("ParseAttempt(%q) = %d, %v", s, got, ok)
		}
	}
}

func TestIsCode(t *testing.T) {
	t.Parallel()
	long := "a" + strings.Repeat("b", 127) // 128 bytes: the longest code
	for s, want := range map[string]bool{
		"not_found": true, "webhook_signature_key_revoked": true, "a": true, "a.b-c_9": true, long: true,
		"": false, "Not_found": false, "9lives": false, "_x": false, "a b": false, "a/b": false, long + "c": false,
	} {
		if IsCode(s) != want {
			t.Errorf("IsCode(%q) = %v, want %v", s, !want, want)
		}
	}
}

// referenceNotificationTypes is NotificationTypes as json.Unmarshal into a
// map reads it: every member decoded, the last of one name winning.
func referenceNotificationTypes(result []byte) []string {
	var members map[string]json.RawMessage
	if json.Unmarshal(result, &members) != nil {
		return nil
	}
	var types []string
	for name, v := range members {
		var t string
		if strings.EqualFold(name, "notification_type") && json.Unmarshal(v, &t) == nil && t != "" {
			types = append(types, t)
		}
	}
	return types
}

var notificationTypesSeeds = []string{
	`{"notification_type":"final","currency":"USD"}`,
	` { "a" : [1, {"notification_type":"x"}], "NOTIFICATION_TYPE" : "scheduled" , "Notification_Type":"" } `,
	`{"notification_type":"final","notification_type":7}`,
	`{"notification_type":7,"notification_type":"final"}`,
	`{"notification\u005ftype":"delayed","notification_type":"final"}`,
	`{"notification_type":"a\"b","x":"\\"}`,
	`{"notification_type":null}`,
	`{}`, `[]`, `null`, `"notification_type"`, `{"notification_type":"final"`, ``, `{"a":1,}`,
	`{"notification_type":"\ud800"}`, "{\"notification_type\":\"\xff\"}",
}

// TestNotificationTypes: read in place, a result names the types a map
// of its members names.
func TestNotificationTypes(t *testing.T) {
	t.Parallel()
	for _, doc := range notificationTypesSeeds {
		got, want := NotificationTypes([]byte(doc)), referenceNotificationTypes([]byte(doc))
		slices.Sort(got)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Errorf("NotificationTypes(%s) = %q, want %q", doc, got, want)
		}
	}
}

func FuzzNotificationTypes(f *testing.F) {
	for _, doc := range notificationTypesSeeds {
		f.Add([]byte(doc))
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		got, want := NotificationTypes(doc), referenceNotificationTypes(doc)
		slices.Sort(got)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Fatalf("NotificationTypes(%q) = %q, want %q", doc, got, want)
		}
	})
}
