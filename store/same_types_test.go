package store

import (
	"reflect"
	"testing"
)

// TestSameComparesArgsOfTheRowsTypes: same and republished compare the
// stored row's typed fields with an enqueue's arguments, values of type
// any. A comparison of an int field with an argument that became an int64
// (or of a string field with a named string type) compiles, and is never
// equal: every enqueue made again would become an idempotency collision.
// Each compared argument holds its field's type.
func TestSameComparesArgsOfTheRowsTypes(t *testing.T) {
	o := &Outbox{s: &Store{cfg: Config{}.withDefaults()}}
	args, err := o.enqueueArgs(EnqueueParams{NotificationID: "n-1", Endpoint: "https://r.example/h", Payload: []byte(`{}`),
		KeyID: "k", Priority: 3, MaxAttempts: 5, OrderingKey: "key"}, 1)
	if err != nil {
		t.Fatal(err)
	}
	var r outboxRow
	for arg, field := range map[string]any{
		"profile":      r.Profile,
		"key_id":       r.KeyID,
		"priority":     r.Priority,
		"max_attempts": r.MaxAttempts,
		"ordering_key": r.OrderingKey.String, // compared as nullable(r.OrderingKey.String)
	} {
		if got, want := reflect.TypeOf(args[arg]), reflect.TypeOf(field); got != want {
			t.Errorf("argument %q is a %v, the row's field a %v: same would never find them equal", arg, got, want)
		}
	}
	if _, ok := args[argAskedAttempts].(int); !ok {
		t.Errorf("argument %q is a %T; sameBudget takes an int", argAskedAttempts, args[argAskedAttempts])
	}
}
