package ack_test

import (
	"fmt"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/ack"
)

// A receiver of one's own answers each notification it accepted with the
// Ack of the exact bytes it received; the sender checks the answer with
// the delivery's profile. An Ack of other bytes proves nothing: the
// delivery fails with ack_invalid.
func ExampleNew() {
	body := []byte(`{"order":"order-1","event":"paid"}`)

	// The receiver's side: what it writes with its 200.
	answer := ack.New("order-1-paid", body).Marshal()
	fmt.Println(string(answer))

	// The sender's side: the courier profile verifies it.
	profile, ok := ack.Builtin(ack.ProfileCourier)
	if !ok {
		panic("no courier profile")
	}
	sent := ack.Sent{ID: "order-1-paid", Payload: body, Attempt: 1}
	fmt.Println("verified:", profile.Verify(sent, answer) == nil)

	other := ack.New("order-1-paid", []byte(`{"order":"order-1","event":"refunded"}`)).Marshal()
	fmt.Println("other bytes:", courier.CodeOf(profile.Verify(sent, other)))
	// Output:
	// {"notification_id":"order-1-paid","notification_sha256":"3a9e83d21b032c9d1fa80014c2eaac9fb12c82f9f7ada17403d43cf62193e189","schema":"courier.ack.v1","status":"accepted"}
	// verified: true
	// other bytes: ack_invalid
}

// Canonical JSON is how courier derives an identity or a digest from
// content: the same document, however it was serialized, has one canonical
// form, byte for byte the one Python's json.dumps writes with sort_keys,
// compact separators, ensure_ascii=False and allow_nan=False. A document
// that is ambiguous (a key twice) has none.
func ExampleCanonical() {
	sent := []byte(`{"b": [1, 2.50, 1e3], "a": "caf\u00e9 <&>", "\u00e9": null}`)
	canonical, err := ack.Canonical(sent)
	if err != nil {
		panic(err)
	}
	fmt.Println(string(canonical))

	again, err := ack.Canonical([]byte(`{"é":null,"a":"café <&>","b":[1,2.5,1000.0]}`))
	if err != nil {
		panic(err)
	}
	fmt.Println("same digest:", ack.Digest(again) == ack.Digest(canonical))

	_, err = ack.Canonical([]byte(`{"a":1,"a":2}`))
	fmt.Println("duplicate key refused:", err != nil)
	// Output:
	// {"a":"café <&>","b":[1,2.5,1000.0],"é":null}
	// same digest: true
	// duplicate key refused: true
}
